"""The Chinese of what tracer/attribute/ says, keyed by its English: the catalogue of this package's messages
(MESSAGES), plural forms (PLURALS) and UI words (UI), kept as tracer/zh.py keeps the whole (its docstring says how).
Nothing here imports anything."""

UI: dict[str, str] = {
    'component': '组成部分',
    'value': '值',
    'share': '占比',
    'sum of the parts': '各部分之和',
}

MESSAGES: dict[str, str] = {
    "tracer attribute splits a decoder-only stack's residual stream; an encoder-decoder is not one": 'tracer attribute 拆分仅解码器堆叠的残差路径；编码器-解码器不是这种结构',
    "tracer attribute splits a token's logit, and this spec has no head (block.head: none): nothing scores the vocabulary": 'tracer attribute 拆分一个词元的 logit，而这个 spec 没有输出头（block.head: none）：没有东西给词表打分',
    "tracer attribute splits the residual stream into a sum of parts, and in a Post-Norm stack (block.norm_order: post) each layer's output is a norm of the stream, not a sum: the split would not be exact": 'tracer attribute 把残差路径拆成各部分之和，而在 Post-Norm 堆叠中（block.norm_order: post），每一层的输出是残差路径的归一化，不是一个和：拆分不会是精确的',
    "tracer attribute splits the residual stream into a sum of parts, and in a sandwich stack (block.norm_order: sandwich) each sublayer's output is normalised before it is added, so its heads are not a sum: the split would not be exact": 'tracer attribute 把残差路径拆成各部分之和，而在夹心归一化堆叠中（block.norm_order: sandwich），每个子层的输出在相加之前先被归一化，所以它的各个头不是一个和：拆分不会是精确的',
    'tracer attribute splits the logits linearly, and this head soft-caps them (block.head_softcap: {cap}): cap * tanh(x / cap) is not a sum of its parts': 'tracer attribute 线性地拆分 logits，而这个输出头对它们做了软上限（block.head_softcap: {cap}）：cap * tanh(x / cap) 不是其各部分之和',
    "tracer attribute freezes the final norm's scale of each position, and {stage} ({op}) takes its statistics over more than one position": 'tracer attribute 冻结每个位置上最终归一化的缩放，而 {stage}（{op}）的统计量跨越不止一个位置',
    "tracer attribute splits the residual stream into a sum of parts, and {stage} normalises a sum before it is added on (block.norm_order: {order}): the parts' outputs do not add up to the stream": 'tracer attribute 把残差路径拆成各部分之和，而 {stage} 在相加之前先对一个和做了归一化（block.norm_order: {order}）：各部分的输出加起来不等于残差路径',
    'the run flagged a {kind} violation at {stage}: tracer attribute splits a run free of violations (`tracer run SPEC` shows it)': '运行在 {stage} 处出现 {kind} 违规：tracer attribute 只拆分没有违规的运行（`tracer run SPEC` 会显示它）',
    '{option} {token}: the tokenizer has no single token with this text (give its id instead)': '{option} {token}：分词器中没有恰好是这段文本的单个词元（请改为给出它的 id）',
    "direct logit attribution of {what} at {where}: the residual stream's parts through the head": '{where} 处 {what} 的直接 logit 归因：残差路径的各部分经过输出头',
    "direct logit attribution of {what} at {where}: the residual stream's parts through the final norm (its scale frozen at {scale}, from the whole stream) and the head": '{where} 处 {what} 的直接 logit 归因：残差路径的各部分经过最终归一化（其缩放冻结为 {scale}，取自整个残差路径）和输出头',
    'heads by layer: shade |value| against the largest, {vmax}; red raises the logit, blue lowers it': '各层的头：深浅为 |值| 相对最大值 {vmax}；红色使 logit 升高，蓝色使其降低',
    "the parts sum to {total}, the run's logit{diff} {logit}: sum - logit = {gap}": '各部分之和为 {total}，运行本身的 logit{diff}为 {logit}：和 - logit = {gap}',
    ' difference': ' 差',
    'attribution patching: the first-order change of the logit of {what} at b={b}, t={t} with each stage patched from the clean run, (clean - corrupt) . gradient at the corrupt run': '归因修补：b={b}, t={t} 处 {what} 的 logit 在各阶段从干净运行修补时的一阶变化，即 (干净 - 损坏) · 损坏运行处的梯度',
    "attribution patching: the first-order estimate of the change of the logit of {what} at b={b}, t={t}, beside tracer patch's own (estimate / real / error)": '归因修补：b={b}, t={t} 处 {what} 的 logit 变化的一阶估计，与 tracer patch 本身的结果并列（估计 / 实际 / 误差）',
    'logit of {what} at b={b}, t={t}: clean {clean}, corrupt {corrupt}': 'b={b}, t={t} 处 {what} 的 logit：干净运行 {clean}，损坏运行 {corrupt}',
    '; the largest |error| of the estimate is {err} (the largest |real| change {real})': '；估计的最大 |误差| 为 {err}（实际变化的最大 |值| 为 {real}）',
    'shade: |estimate| against the largest, {vmax}; red raises the logit, blue lowers it': '深浅：|估计| 相对最大值 {vmax}；红色使 logit 升高，蓝色使其降低',
    'the run flagged a {kind} violation at {stage}: attribution patching needs both runs free of violations (`tracer run SPEC` shows it)': '运行在 {stage} 处出现 {kind} 违规：归因修补需要两次运行都没有违规（`tracer run SPEC` 会显示它）',
    "attribution patching follows a token's logit: the spec needs an output head (block.head: tied or separate)": '归因修补跟踪一个词元的 logit：spec 需要输出头（block.head: tied 或 separate）',
    '--real runs tracer patch, which follows the logit at the last position (t={last}); --position {t} is another': '--real 会运行 tracer patch，而它跟踪的是最后一个位置（t={last}）的 logit；--position {t} 是另一个位置',
    "--stage {name}: its {n} positions are not the logits' T = {T}, so its cells are not a position each": '--stage {name}：它的 {n} 个位置不等于 logits 的 T = {T}，所以它的单元不是每个位置一个',
    '--page draws one run and its split (the components table, the heads heatmap); attribution patching (--corrupt) reads two runs and has no page: give one of them': '--page 画出一次运行及其拆分（组成部分表和各层的头的热力图）；归因修补（--corrupt）读取两次运行，没有页面：请只给出其中一个',
    '{option} belongs to attribution patching: give --corrupt CORRUPT too': '{option} 属于归因修补：请同时给出 --corrupt CORRUPT',
    "--text replaces one spec's input; attribution patching reads two specs (SPEC, the clean run, and --corrupt): write each one's input in it": '--text 替换一个 spec 的输入；归因修补读取两个 spec（SPEC 即干净运行，以及 --corrupt）：请把各自的输入写在各自的 spec 里',
}
