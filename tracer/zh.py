"""The Chinese catalogue (the book's words), keyed by the English tracer prints.

- UI: fixed words and lines, English -> Chinese; ``{field}`` marks a value filled in later.
- MEANINGS: the built-in stage meanings (blocks.py, catalogue.py) as Table 17.1 words them:
  the chapter's pre-norm block is exactly the table's "阶段" column (X, N_1, U, R, N_2,
  "FFN 的 ReLU 之后", "FFN 输出", Y); the others follow its style and the book's and the guide's
  terms (残差相加, 归一化, 前馈网络, 注意力, 因果掩码, 交叉注意力, 位置编码, 编码器, 解码器).
  ``{norm}``, ``{LN}``, ``{act}``, ``{actf}`` are filled in for the RMSNorm / BatchNorm /
  activation variants, the way blocks.configure fills in the English.
- TEMPLATES: sentences built elsewhere (errors, violations, notes, diff, probe, graph, attention):
  English with {fields} -> Chinese.  A field is carried over verbatim (paths, shapes, values,
  names); ``{x!t}`` marks one whose text is itself translated (a fragment such as 'a mapping').
  When several templates match, the one with the most literal English wins.

Punctuation: Chinese text uses full-width ，：；（）; file:line:col, field paths, shapes,
formulas and code keep their ASCII form, so they read (and grep) the same in both languages.
Nothing here imports anything.
"""

from __future__ import annotations

# -- stage meanings --------------------------------------------------------------------

MEANINGS: dict[str, str] = {
    # before the block
    "X (rotary positions act inside attention)": "X（旋转位置编码在注意力内部起作用）",
    "X (no positions)": "X（没有位置信息）",
    # the pre-norm layer (Table 17.1, word for word)
    "first normalisation, N_1 = LN_1(X)": "第一次{norm}，N_1",
    "attention output, U = MHA(N_1)": "注意力输出，U",
    "first residual add, R = X + U": "第一次残差相加，R",
    "second normalisation, N_2 = LN_2(R)": "第二次{norm}，N_2",
    "FFN after the activation, act(N_2 W_1 + b_1)": "FFN 的{act}之后",
    "FFN output, hidden W_2 + b_2": "FFN 输出",
    "block output, Y = R + FFN(N_2)": "块的最终输出，Y",
    # the post-norm layer (section 17.6): where a symbol means something else, the formula says what
    "attention output, U = MHA(X)": "注意力输出，U = MHA(X)",
    "first residual add, X + U": "第一次残差相加，X + U",
    "first normalisation, R_post = LN_1(X + U)": "第一次{norm}，R_post = {LN}1(X + U)",
    "FFN after the activation, act(R_post W_1 + b_1)": "FFN 的{act}之后，{actf}(R_post W_1 + b_1)",
    "second residual add, R_post + FFN(R_post)": "第二次残差相加，R_post + FFN(R_post)",
    "second normalisation, LN_2(R_post + FFN)": "第二次{norm}，{LN}2(R_post + FFN)",
    "block output, Y_post": "块的最终输出，Y_post",
    # a decoder layer of an encoder-decoder (the guide, section 9)
    "first normalisation, LN_1(X)": "第一次{norm}，{LN}1(X)",
    "first normalisation, LN_1(X + U)": "第一次{norm}，{LN}1(X + U)",
    "masked self-attention": "带掩码的自注意力",
    "first residual add": "第一次残差相加",
    "second normalisation": "第二次{norm}",
    "cross-attention: decoder queries, encoder keys and values": "交叉注意力：查询来自解码器，键和值来自编码器",
    "second residual add": "第二次残差相加",
    "third normalisation": "第三次{norm}",
    "FFN after the activation": "FFN 的{act}之后",
    "FFN output": "FFN 输出",
    "third residual add": "第三次残差相加",
    "decoder layer output": "解码器层的输出",
    # after the stack
    "final normalisation after the stack": "堆叠之后的最终{norm}",
    "logits over the vocabulary": "词表上的 logits",
    "next-token probabilities, softmax over V": "下一个 token 的概率，沿 V 做 softmax",
    # attention internals
    "queries, split into heads": "查询（Q），拆成多个头",
    "keys, split into heads": "键（K），拆成多个头",
    "values, split into heads": "值（V），拆成多个头",
    "scores QK^T / sqrt(d), before the mask": "分数 QK^T / sqrt(d)，掩码之前",
    "attention weights, softmax over keys after the mask": "注意力权重，掩码之后沿键做 softmax",
    "heads mixed and concatenated, before W_O": "各头混合后拼接，乘 W_O 之前",
    # the ops' own meanings are in their records (tracer/model/ops.py)
    "token embeddings": "token 嵌入",
    "an encoder layer: the pre-norm or post-norm layer's stages over the S source positions, attention unmasked":
        "编码器层：Pre-Norm 或 Post-Norm 层的各阶段，作用于 S 个源位置，注意力不加掩码",
}
SINUSOIDAL = "正余弦位置编码，底数 {base}"

# Suffixes the executor and the catalogue append to a meaning ({x}: a value carried over).
MEANING_SUFFIXES: tuple[tuple[str, str], ...] = (
    (", turned by rotary positions", "，经旋转位置编码转动"),
    (" (pre-norm decoder layer)", "（Pre-Norm 解码器层）"),
    (" (post-norm decoder layer)", "（Post-Norm 解码器层）"),
    (" (the decoder output)", "（解码器的输出）"),
    (" (the encoder output: the memory cross-attention reads)", "（编码器的输出：交叉注意力读取的 memory）"),
    (" (block.norm: {x})", "（block.norm: {x}）"),
    (" (block.activation: {x})", "（block.activation: {x}）"),
    (" (block.rotary_pairing: {x})", "（block.rotary_pairing: {x}）"),
    (" (grouped-query attention, dims.H_kv < H)", "（分组查询注意力，dims.H_kv < H）"),
)

# blocks.configure's words for the norms: English word -> (key, the letters that replace LN_)
NORM_WORDS: dict[str, tuple[str, str]] = {
    "RMS normalisation": ("rms", "RMS_"),
    "batch normalisation (over B and T)": ("batch", "BN_"),
}
NORM_ZH = {"normalisation": "归一化", "rms": " RMS 归一化", "batch": "批归一化（统计量跨 B 和 T）"}
# longest first: "GELU (tanh)" before "GELU"
ACTIVATION_NAMES = ("GELU (tanh)", "SwiGLU", "GELU", "ReLU")


# -- UI words ----------------------------------------------------------------------------

KINDS = {"broadcast": "广播", "axis": "轴", "position": "位置", "nonfinite": "非有限值", "causality": "因果性", "verify": "核对"}

UI: dict[str, str] = {
    # the trace table (Table 17.1's columns)
    "stage": "记录名",
    "what it is": "阶段",
    "value at b={b}, t={t}{word}": "b={b}, t={t}{word} 处的值",
    "value at b=0, t=0{word}": "第一个位置{word}",  # Table 17.1's own head for the value column
    "shape": "整个数组的 shape",
    "max |NumPy - reference|": "max |NumPy - 参考实现|",
    "not checked": "未核对",
    "  ← violation": "  ← 违规",
    "{order}, mask {mask}, eps {eps}; {dims}": "{order}，掩码 {mask}，eps {eps}；{dims}",
    "{kind}; {dims}": "{kind}；{dims}",
    "pre-norm": "Pre-Norm",
    "post-norm": "Post-Norm",
    "custom steps": "自定义步骤",
    "{name} for sample b={b}, {meaning}:": "样本 b={b} 的 {name}（{meaning}）：",
    "… {n} values": "… 共 {n} 个值",
    "… {n} rows": "… 共 {n} 行",
    "kept as statistics (--record stats; --keep STAGE keeps one in full):": "只保留了统计量（--record stats；--keep STAGE 可保留某个阶段的全部值）：",
    "  {name} {shape}: mean {mean}, std {std}, min {min}, max {max}": "  {name} {shape}：均值 {mean}，标准差 {std}，最小 {min}，最大 {max}",
    # violations
    "{kind} violation at stage {stage}": "阶段 {stage} 出现{kind}违规",
    "violation: {kind}": "违规：{kind}",
    "{label}: ": "{label}：",
    "rule": "规则",
    "NumPy would": "NumPy 会",
    "why it is wrong here": "为什么这里不对",
    **KINDS,
    # --steps
    "#": "#",
    "op": "op",
    "reads": "读取",
    "weights": "权重",
    "settings": "设置",
    # many specs
    "ok": "通过",
    "violation": "违规",
    "error": "错误",
    "{kind} at {stage}": "{stage} 处{kind}违规",
    " ({note})": "（{note}）",
    " ({kind} violation: tracer run flags it)": "（{kind}违规：tracer run 会标出它）",
    # the CLI's own lines
    "tracer: error: ": "tracer: 错误：",
    "tracer: note: ": "tracer: 注意：",
    "tracer: wrote {path}": "tracer: 已写入 {path}",
    "interrupted": "已中断",
    "terminated": "已终止",
    # tracer probe
    "{name}: properties": "{name}：性质检查",
    "property": "性质",
    "result": "结果",
    "evidence": "证据",
    "pass": "通过",
    "fail": "不通过",
    "not applicable": "不适用",
    "cannot measure": "无法测量",
    "permutation equivariance": "置换等变性",
    # tracer stages
    "formula": "公式",
    "before the block": "进入块之前",
    "pre-norm layer (norm_order: pre, Example 17.2)": "Pre-Norm 层（norm_order: pre，例 17.2）",
    "post-norm layer (norm_order: post, section 17.6)": "Post-Norm 层（norm_order: post，17.6 节）",
    "attention internals (shown with --all)": "注意力内部（--all 时显示）",
    "after the last layer": "最后一层之后",
    "encoder-decoder (model: encoder-decoder)": "编码器—解码器（model: encoder-decoder）",
    "variants (block.norm, block.activation)": "变体（block.norm、block.activation）",
    "In a stack (block.layers > 1) every layer stage is prefixed with its layer: blocks.0.norm1, "
    "blocks.1.norm1, ...; in an encoder-decoder with encoder.blocks.N. and decoder.blocks.N.":
        "在堆叠中（block.layers > 1），每一层的记录名前加上所在层：blocks.0.norm1、blocks.1.norm1……；"
        "编码器—解码器中加 encoder.blocks.N. 和 decoder.blocks.N.",
    # tracer diff: headers, titles, status words
    "A": "A",
    "B": "B",
    "step": "步骤",
    "setting": "设置项",
    "shape A": "A 的 shape",
    "shape B": "B 的 shape",
    "largest |A - B|": "最大 |A - B|",
    "at": "位置",
    "A there": "A 在该处",
    "B there": "B 在该处",
    "status": "状态",
    "shape in A": "A 中的 shape",
    "shape in B": "B 中的 shape",
    "A at {at}": "A 在 {at}",
    "B at {at}": "B 在 {at}",
    "equal": "相等",
    "differs": "不同",
    "shapes differ": "shape 不同",
    "only in A": "仅 A 有",
    "only in B": "仅 B 有",
    "  ← first difference": "  ← 第一处不同",
    # tracer diff against your own arrays: status word and hints (hints.py)
    "not recorded": "未记录",
    "hint: {hint}": "提示：{hint}",
    "{lead}: look at {advice}": "{lead}：请检查{advice}",
    "{hint}. {diagnosis}": "{hint}。{diagnosis}",
    "{stage} differs but {prev} agrees": "{stage} 不同，但 {prev} 一致",
    "{stage} differs and no stage before it was compared": "{stage} 不同，而它之前没有可以比较的阶段",
    "{stage} has another shape than tracer's": "{stage} 的 shape 与 tracer 的不同",
    "LayerNorm (divide by C, not C-1; ε inside the square root; mean and variance over the C coordinates of each position, not over T or B)":
        "LayerNorm（除以 C，不是 C-1；ε 放在平方根里面；均值和方差在每个位置的 C 个坐标上求，不是在 T 或 B 上）",
    "RMSNorm (the mean of the squares over C, ε inside the square root, no mean subtracted)":
        "RMSNorm（在 C 上求平方的均值，ε 放在平方根里面，不减均值）",
    "BatchNorm (mean and variance over B and T, per coordinate)": "BatchNorm（每个坐标在 B 和 T 上求均值和方差）",
    "attention: the softmax over the keys (the last axis), not the queries; the mask before the softmax, not after; "
    "the scores divided by sqrt(d); the heads times W_O. Record attn.weights and attn.heads to see which":
        "注意力：softmax 在键上求（最后一个轴），不是在查询上；掩码在 softmax 之前加，不是之后；分数除以 sqrt(d)；"
        "各头的结果要乘 W_O。记录 attn.weights 和 attn.heads 可以看出是哪一处",
    "cross-attention: queries from the decoder, keys and values from the encoder output; the softmax over the keys":
        "交叉注意力：查询来自解码器，键和值来自编码器输出；softmax 在键上求",
    "the scores: Q_h K_h^T / sqrt(d) for each head, queries as rows, before the mask":
        "分数：每个头的 Q_h K_h^T / sqrt(d)，查询为行，在加掩码之前",
    "the softmax: over the keys (the last axis), not the queries, with the mask applied before it (each row sums to 1)":
        "softmax：在键上求（最后一个轴），不是在查询上，掩码在它之前加（每一行之和为 1）",
    "the mixing: the weights times V for each head, the heads concatenated in order, before W_O":
        "加权求和：每个头的权重乘 V，各头按顺序拼接，在乘 W_O 之前",
    "the projections: X W_Q + b_Q (likewise K and V), split into H heads of width d":
        "投影：X W_Q + b_Q（K 和 V 同理），再分成 H 个宽度为 d 的头",
    "the residual add: both terms, the stream and the sublayer's output": "残差相加：两项都要有，残差路径上的值和子层的输出",
    "the FFN's first layer: act(N_2 W_1 + b_1), reading the second normalisation": "FFN 的第一层：act(N_2 W_1 + b_1)，读取第二次归一化的结果",
    "the FFN's second layer: hidden W_2 + b_2": "FFN 的第二层：hidden W_2 + b_2",
    "the FFN: act(N_2 W_1 + b_1) W_2 + b_2, reading the second normalisation": "FFN：act(N_2 W_1 + b_1) W_2 + b_2，读取第二次归一化的结果",
    "the input: the rows of E for the token ids, plus the rows of P (X = E + P)": "输入：按 token id 取 E 的行，再加上 P 的行（X = E + P）",
    "the array's shape: record it with tracer's axes, in the book's order (see the shape columns)":
        "数组的 shape：按 tracer 的轴、书中的顺序记录（见 shape 两列）",
    "the step that computes it": "计算它的那一步",
    "Your {stage} equals LayerNorm with the variance divided by C-1 (ddof=1): divide by C":
        "你的 {stage} 等于方差除以 C-1（ddof=1）的 LayerNorm：应除以 C",
    "Your {stage} equals LayerNorm with its mean and variance taken over {axis} instead of over C":
        "你的 {stage} 等于在 {axis} 上、而不是在 C 上求均值和方差的 LayerNorm",
    "T (the positions)": "T（各位置）",
    "B (the samples)": "B（各样本）",
    "Your {stage} equals {term} alone: the residual add is missing (add {other})": "你的 {stage} 只等于 {term}：少了残差相加（加上 {other}）",
    "Your {stage} equals the heads before W_O: multiply by W_O (and add b_O)": "你的 {stage} 等于乘 W_O 之前的各头结果：应乘 W_O（并加 b_O）",
    "Your {stage} equals attention with the softmax taken over the queries: take it over the keys (the last axis)":
        "你的 {stage} 等于在查询上求 softmax 的注意力：应在键上求（最后一个轴）",
    "Your {stage} equals attention with the mask applied after the softmax: mask the scores first (-inf on future keys), then the softmax":
        "你的 {stage} 等于在 softmax 之后才加掩码的注意力：应先给分数加掩码（未来的键为 -inf），再求 softmax",
    "Structure: the two step lists, aligned by step name": "结构：两份步骤列表，按步骤名对齐",
    "Settings that differ": "不同的设置",
    "What differs:": "不同之处：",
    "note: {note}": "注意：{note}",
    "Settings: the same {first} and {last}": "设置：{first}和{last}都相同",
    ", ": "、",
    "dims": "维度",
    "block settings": "block 设置",
    "all {n} weights (within {tol})": "全部 {n} 个权重（在 {tol} 内）",
    "rows of E": "E 的行",
    "rows of P": "P 的行",
    "the given input": "给定的输入",
    "sinusoidal table": "正余弦表",
    # tracer graph
    "computes": "计算",
    "stored weights": "保存的权重",
    "(not recorded)": "（未记录）",
    "┬ … ⊕ ": "┬ … ⊕ ",
    "a residual path: the stage at ┬ goes through the steps on the rail, and unchanged into the add at ⊕\n":
        "一条残差路径：┬ 处的阶段一路经过竖线上的各步骤，另一路原样进入 ⊕ 处的相加\n",
    "attn.* and cross.* ": "attn.* 和 cross.* ",
    "rows are attention internals (tracer run --all prints their values); ": "行是注意力内部（tracer run --all 打印它们的值）；",
    "(not recorded) ": "（未记录） ",
    "is a shape inside a step; shapes are [axes] = [sizes]": "是步骤内部的 shape；shape 写作 [轴] = [大小]",
    # tracer run --attention
    "{name}: attention weights": "{name}：注意力权重",
    "   blank: exactly 0   ": "   空白：恰好为 0   ",
    "= NaN or Inf": "= NaN 或 Inf",
    "keys: ": "键：",
    "head {h}": "头 {h}",
    " (max {m})": "（最大 {m}）",
    "{meaning}; sample b={b}; {shape}": "{meaning}；样本 b={b}；{shape}",
    "rows: queries ({q}), columns: keys ({k}); {mask}": "行：查询（{q}），列：键（{k}）；{mask}",
    "> {p}% of the head's largest block mean   ": "> 该头最大块均值的 {p}%   ",
    "masked (the whole block)   ": "已遮挡（整个块）   ",
    "masked: the mask hides that key   ": "已遮挡：掩码挡住了这个键   ",
    "\ncolour scale: 0 ": "\n颜色刻度：0 ",
    " max": " 最大",
    # tracer grad: the training signal (训练信号), its gradient (梯度) at every stage
    "{name}: the training signal (gradients), stage by stage": "{name}：训练信号（梯度），逐阶段",
    "gradient at b={b}, t={t}{word}": "b={b}, t={t}{word} 处的梯度",
    "|gradient|": "|梯度|",
    "|gradient| / |value|": "|梯度| / |值|",
    "loss {name} = {value}: {formula}; gradients in backward order, from the loss to the input":
        "损失 {name} = {value}：{formula}；梯度按反向传播的顺序列出，从损失到输入",
    "weight gradients, grouped by layer": "权重的梯度，按层分组",
    "layer": "层",
    "weight": "权重",
    "{name}: |dL/d {weight}| of each layer": "{name}：每一层的 |dL/d {weight}|",
    "loss {name}; last / first layer = {ratio}": "损失 {name}；最后一层 / 第一层 = {ratio}",
    "/ layer 0": "/ 第 0 层",
}


# -- sentences ---------------------------------------------------------------------------

TEMPLATES: dict[str, str] = {
    # -- did you mean --
    "did you mean {names!t}?": "是不是想写 {names}？",
    "did you mean {names!t}? (`tracer stages` lists every name)": "是不是想写 {names}？（`tracer stages` 列出所有名字）",
    "did you mean {names!t}? (`tracer run SPEC --steps` lists a spec's stages, `tracer stages` what each name means)":
        "是不是想写 {names}？（`tracer run SPEC --steps` 列出 spec 的阶段，`tracer stages` 说明每个名字的含义）",
    "known keys: {keys}": "已知的键：{keys}",
    "known ops: {ops}": "已知的 op：{ops}",
    "stages so far: {names}": "此前的阶段：{names}",
    "the vocab has {n} words": "词表有 {n} 个词",
    "the model reads: {names}": "模型读取的是：{names}",
    # -- files and YAML (yamlio.py) --
    "no such file": "文件不存在",
    "permission denied": "没有读取权限",
    "cannot read: {why}": "无法读取：{why}",
    "is a directory, expected a YAML spec file": "是一个目录，这里需要 YAML spec 文件",
    "file is {size} bytes, larger than the {limit} a spec may be": "文件有 {size} 字节，超过了 spec 的上限 {limit}",
    "is a binary file (contains NUL bytes), expected a YAML spec": "是二进制文件（含 NUL 字节），这里需要 YAML spec",
    "is not UTF-8 text (byte {byte} at offset {offset})": "不是 UTF-8 文本（偏移 {offset} 处的字节 {byte}）",
    "is empty, expected a YAML mapping with at least 'dims' and 'input'": "是空的，这里需要一个至少含 'dims' 和 'input' 的 YAML 映射",
    "is not a regular file (a pipe, socket or device), expected a YAML spec file": "不是普通文件（是管道、套接字或设备），这里需要 YAML spec 文件",
    "is larger than {n} MiB, the most a spec may be": "超过 {n} MiB，这是 spec 的上限",
    "draw big weights from the seed instead of writing them out": "大的权重请从 seed 抽取，不要逐个写出",
    "a second YAML document ('---')": "出现了第二个 YAML 文档（'---'）",
    "a spec is one document": "一个 spec 只能是一个文档",
    "values nest more than {n} levels deep (YAML nesting is too deep for a spec: its deepest value is a [B,T,C] matrix inside two mappings)":
        "数值嵌套超过 {n} 层（对 spec 来说 YAML 嵌套太深：最深的值是两层映射里的 [B,T,C] 矩阵）",
    "keys must be plain names (not lists, mappings, anchors or aliases)": "键必须是普通名字（不能是列表、映射、锚点或别名）",
    "tracer reads plain YAML only (quote a value to make it text)": "tracer 只读取普通 YAML（给值加引号即可当作文本）",
    "the alias *{a} refers to no complete anchor before it (an anchor cannot be used inside its own value)":
        "别名 *{a} 之前没有完整的锚点（锚点不能在它自己的值里使用）",
    "the document has more than {n} values once its aliases are expanded": "展开别名后，文档有超过 {n} 个值",
    "the document has more than {n} values ; a spec this large cannot be traced here (draw big weights from the seed instead)":
        "文档有超过 {n} 个值；这么大的 spec 无法在这里追踪（大的权重请从 seed 抽取）",
    "YAML syntax error: {problem!a}; it started at line {l}, column {c}": "YAML 语法错误：{problem}；它从第 {l} 行第 {c} 列开始",
    "expected {what!t}, received {got!t} (add a vocab list to write tokens as words)": "应为{what}，实际为{got}（若要用词写 token，请加上 vocab 列表）",
    "YAML syntax error: {problem!a}": "YAML 语法错误：{problem}",
    "YAML error: {problem!a}": "YAML 错误：{problem}",
    "YAML nesting is too deep (a spec nests at most {n} levels)": "YAML 嵌套太深（spec 最多嵌套 {n} 层）",
    "the document is {kind!t}": "文档是{kind}",
    "the document is {kind!t}; a spec must be a mapping of keys such as dims, block, weights":
        "文档是{kind}；spec 必须是由 dims、block、weights 等键组成的映射",
    "the document expands to {n} values (more than {limit})": "文档展开后有 {n} 个值（超过 {limit}）",
    "anchors and aliases that multiply like this are refused": "这样成倍展开的锚点和别名会被拒绝",
    "values nest more than {n} levels deep": "数值嵌套超过 {n} 层",
    "the tag {tag} is not allowed": "不允许使用标签 {tag}",
    "tracer reads plain YAML only": "tracer 只读取普通 YAML",
    "keys must be plain names (merge keys '<<' are not supported)": "键必须是普通名字（不支持合并键 '<<'）",
    "duplicate key": "重复的键",
    "duplicate key (first given at line {n})": "重复的键（第一次出现在第 {n} 行）",
    "unsupported YAML node": "不支持的 YAML 节点",
    "cannot read {text} as an integer": "无法把 {text} 读成整数",
    "cannot read {text} as a number": "无法把 {text} 读成数",
    # -- the spec (spec.py) --
    "expected {what!t}, received {got!t}": "应为{what}，实际为{got}",
    "received {value} (not finite)": "实际为 {value}（不是有限值）",
    "add allow_nonfinite: true to study NaN and Inf on purpose": "若要有意研究 NaN 和 Inf，请加上 allow_nonfinite: true",
    "unknown key {key}": "未知的键 {key}",
    "missing required section 'dims' (e.g. dims: {C: 2, H: 2, F: 3})": "缺少必需的部分 'dims'（例如 dims: {C: 2, H: 2, F: 3}）",
    "missing required section 'input' (tokens: [...] or x: [[...]])": "缺少必需的部分 'input'（tokens: [...] 或 x: [[...]]）",
    "missing dimension {k} (dims needs C, H and F; B, T, V, T_max follow from input and tables)":
        "缺少维度 {k}（dims 需要 C、H 和 F；B、T、V、T_max 由输入和表推出）",
    "H = {h} must divide C = {c} (each head has width d = C / H)": "H = {h} 必须整除 C = {c}（每个头的宽度是 d = C / H）",
    "rotary positions rotate pairs of coordinates: d = C / H = {d} must be even": "旋转位置编码成对转动坐标：d = C / H = {d} 必须是偶数",
    "H_kv = {hkv} must divide H = {h} (each key/value head serves H / H_kv query heads)":
        "H_kv = {hkv} 必须整除 H = {h}（每个键/值头供 H / H_kv 个查询头共用）",
    "rotary_pairing is for rotary positions, but positions is {p}": "rotary_pairing 用于旋转位置编码，但 positions 是 {p}",
    "'{key}' belongs to model: encoder-decoder": "'{key}' 属于 model: encoder-decoder",
    "a decoder-only model has one 'block'": "仅解码器模型只有一个 'block'",
    "an encoder-decoder has 'encoder' and 'decoder' sections instead of 'block'": "编码器—解码器用 'encoder' 和 'decoder' 两部分代替 'block'",
    "custom steps are for decoder-only models": "自定义步骤只用于仅解码器模型",
    "use norm_order here": "这里请用 norm_order",
    "the output head belongs to the decoder: write head under decoder (an encoder has none)": "输出层属于解码器：请把 head 写在 decoder 下（编码器没有输出层）",
    "expected a non-empty list of words, received {got!t}": "应为非空的词列表，实际为{got}",
    "expected a word (text), received the number {v}; quote it ({q}) if it is a word: unquoted numbers in tokens are ids":
        "应为词（文本），实际为数字 {v}；如果它是词，请加引号（{q}）：tokens 里不加引号的数字是 id",
    "expected the name of a stage before this step (e.g. in: x, or in: [x, attention]), received {got!t}":
        "应为本步骤之前某个阶段的名字（例如 in: x 或 in: [x, attention]），实际为{got}",
    "expected a number smaller than about 1.8e308 in magnitude (the largest a float64 holds), received {got}":
        "应为绝对值小于约 1.8e308 的数（float64 能表示的最大值），实际为{got}",
    "S (source positions) belongs to model: encoder-decoder": "S（源位置数）属于 model: encoder-decoder",
    "{letter} = {given} but the input has {letter} = {found}": "{letter} = {given}，但输入的 {letter} = {found}",
    "an output head needs token input (it scores the vocabulary)": "输出层需要 token 输入（它给词表打分）",
    "token id {id} is out of range: the embedding table has V = {v} rows (ids 0 to {last})":
        "token id {id} 超出范围：嵌入表有 V = {v} 行（id 为 0 到 {last}）",
    "{word} is already word {n}": "{word} 已经是第 {n} 个词",
    "each word needs its own id": "每个词需要自己的 id",
    "give either norm_order (a preset step list) or steps (your own list), not both":
        "norm_order（预设步骤列表）和 steps（自己的列表）只能给一个，不能都给",
    "position_base is for sinusoidal or rotary positions, but positions is {p}": "position_base 用于正余弦或旋转位置编码，但 positions 是 {p}",
    "with custom steps, name the norm op in each step (layer_norm, rms_norm, batch_norm)":
        "使用自定义步骤时，请在每个步骤里写明归一化的 op（layer_norm、rms_norm、batch_norm）",
    "a step is already named final_norm": "已经有一个步骤叫 final_norm",
    "rename it, or drop final_norm: true": "请改名，或去掉 final_norm: true",
    "the final normalisation reads the last step, {name}: {why!t}": "最终归一化读取最后一个步骤 {name}：{why}",
    "step {name}: {why!t}": "步骤 {name}：{why}",
    "step {name} records its attention internals as {prefix}.*, but stage {stage} already exists":
        "步骤 {name} 把注意力内部记录为 {prefix}.*，但阶段 {stage} 已经存在",
    "rename one of the steps": "请给其中一个步骤改名",
    "a step needs {key} (e.g. {example!a})": "步骤需要 {key}（例如 {example}）",
    "stage {name} is already defined": "阶段 {name} 已经定义过",
    "every step records a stage of its own": "每个步骤记录自己的阶段",
    "unknown op {op}": "未知的 op {op}",
    "{op} reads {n} stage, received {m}": "{op} 读取 {n} 个阶段，实际给了 {m} 个",
    "{op} reads {n} stages, received {m}": "{op} 读取 {n} 个阶段，实际给了 {m} 个",
    "no stage {name} before this step": "此步骤之前没有阶段 {name}",
    "{op} needs weights: the name of its weight group (e.g. weights: {g})": "{op} 需要 weights：它的权重组名（例如 weights: {g}）",
    "{name} is a reserved name": "{name} 是保留名",
    "choose another weight group name": "请换一个权重组名",
    "{op} takes no weights": "{op} 不接受权重",
    "{op} takes no axis": "{op} 不接受 axis",
    "only select takes {key}": "只有 select 接受 {key}",
    "only linear takes out": "只有 linear 接受 out",
    "only ffn and ffn_hidden take an activation": "只有 ffn 和 ffn_hidden 接受 activation",
    "{w} is not in the vocab": "{w} 不在词表中",
    "token ids must be 0 or more, received {v}": "token id 必须大于或等于 0，实际为 {v}",
    "give exactly one of tokens (ids into weights.embedding) or x (a [T,C] or [B,T,C] matrix)":
        "tokens（weights.embedding 的 id）和 x（[T,C] 或 [B,T,C] 矩阵）必须恰好给一个",
    "'random' input needs a seed (add seed: 0)": "'random' 输入需要 seed（加上 seed: 0）",
    "'random' input needs dims.T": "'random' 输入需要 dims.T",
    "'random' needs a seed (add seed: 0)": "'random' 需要 seed（加上 seed: 0）",
    "an encoder-decoder needs input.{key} (token ids or words)": "编码器—解码器需要 input.{key}（token id 或词）",
    "'random' {key} tokens need dims.{letter}": "'random' 的 {key} token 需要 dims.{letter}",
    "source has B = {a} samples but target has B = {b}": "source 有 B = {a} 个样本，但 target 有 B = {b} 个",
    "an embedding table is given but the input is x, not tokens": "给了嵌入表，但输入是 x，不是 tokens",
    "a vocab is given but the input is x, not tokens": "给了词表，但输入是 x，不是 tokens",
    "V = {v} but the vocab has {n} words": "V = {v}，但词表有 {n} 个词",
    "table has {rows} rows but {source!t}": "表有 {rows} 行，但{source}",
    "dims.{letter} is needed to draw weights.{name} from the seed": "需要 dims.{letter} 才能从 seed 抽取 weights.{name}",
    "weight group {g} is shared by steps that need different weights ({a} and {b})": "权重组 {g} 被需要不同权重的步骤共用（{a} 和 {b}）",
    "{what!t} '{key}' is given but nothing in the model reads it": "给出了{what} '{key}'，但模型中没有任何步骤读取它",
    "weight": "权重",
    "a position table is given but {sec}.positions is {p}": "给了位置表，但 {sec}.positions 是 {p}",
    "final_norm weights are given but {sec}.final_norm is false": "给了 final_norm 的权重，但 {sec}.final_norm 是 false",
    "an output head matrix is given but {sec}.head is {h} (use head: separate)": "给了输出层矩阵，但 {sec}.head 是 {h}（请用 head: separate）",
    "missing weight {name} {label}, and there is no seed to draw it from (give it, or add seed: 0)":
        "缺少权重 {name} {label}，也没有 seed 可以抽取它（请给出它，或加上 seed: 0）",
    "identity needs a square matrix, but {name} is {label}": "identity 需要方阵，但 {name} 是 {label}",
    "ragged: row {i} has shape {a} but row 0 has {b}": "参差不齐：第 {i} 行的 shape 是 {a}，但第 0 行是 {b}",
    "cannot add {a} and {b}: NumPy cannot broadcast them either": "无法把 {a} 和 {b} 相加：NumPy 也无法广播它们",
    "mha reads all {axis} = {n} positions (its mask is [{axis},{axis}]), received {label}":
        "mha 读取全部 {axis} = {n} 个位置（它的掩码是 [{axis},{axis}]），实际为 {label}",
    "cross_mha reads memory [B,S,C], received {label}": "cross_mha 读取 memory [B,S,C]，实际为 {label}",
    "select along {axis}, but the input is {label}": "沿 {axis} 做 select，但输入是 {label}",
    "select {a}:{b} along {axis}, which has size {n}": "沿 {axis} 做 select {a}:{b}，而该轴的大小是 {n}",
    "{op} reads [B,{pos},{letter}] with {letter} = {n}, received {label}": "{op} 读取 [B,{pos},{letter}]，其中 {letter} = {n}，实际为 {label}",
    # -- the command line --
    "--precision {n} is out of range: give 0 to 17": "--precision {n} 超出范围：请给 0 到 17",
    "--with-weights adds the weights to the JSON output or the --save archive: give --json or --save too":
        "--with-weights 把权重加入 JSON 输出或 --save 存档：请同时给 --json 或 --save",
    "--verify-budget {n} must be at least 1": "--verify-budget {n} 至少为 1",
    "--attention draws a picture; it does not combine with {opt}": "--attention 画的是图；不能与 {opt} 同用",
    "--svg and --html export one spec's view: give one spec": "--svg 和 --html 导出一个 spec 的视图：请只给一个 spec",
    "--svg and --html export the table the terminal shows; they do not combine with --format {f}":
        "--svg 和 --html 导出终端显示的表；不能与 --format {f} 同用",
    "--format {f}: expected one of {options}": "--format {f}：应为 {options} 之一",
    "--json is short for --format json; it cannot be combined with --format {f}": "--json 是 --format json 的简写；不能与 --format {f} 同用",
    "--batch {n} is out of range: B = {b} (samples 0 to {last})": "--batch {n} 超出范围：B = {b}（样本 0 到 {last}）",
    "--pos {n} is out of range: T = {t} (positions 0 to {last})": "--pos {n} 超出范围：T = {t}（位置 0 到 {last}）",
    "--steps shows one spec's step list; give one spec (received {n})": "--steps 显示一个 spec 的步骤列表；请只给一个 spec（实际给了 {n} 个）",
    "give at least one spec": "请至少给一个 spec",
    "--save writes one spec's arrays: give one spec": "--save 写出一个 spec 的数组：请只给一个 spec",
    "--format csv writes every value of every stage, and --record stats keeps only statistics of the big ones: use --record all or main (or --keep the stages you want)":
        "--format csv 写出每个阶段的每个值，而 --record stats 对大的阶段只保留统计量：请用 --record all 或 main（或用 --keep 保留想要的阶段）",
    "{opt} {value}: expected one of {options}": "{opt} {value}：应为 {options} 之一",
    "{opt} {text}: expected a size such as 4GB, 512MB, 2GiB or a number of bytes, or none for no limit (KB, MB, GB, TB are powers of 1000; KiB, MiB, GiB, TiB powers of 1024)":
        "{opt} {text}：应为大小，例如 4GB、512MB、2GiB 或字节数，none 表示不设上限（KB、MB、GB、TB 是 1000 的幂；KiB、MiB、GiB、TiB 是 1024 的幂）",
    "{opt} {text}: the limit must be more than 0 bytes (none turns it off)": "{opt} {text}：上限必须大于 0 字节（none 表示关闭）",
    "--keep {name}: no such stage": "--keep {name}：没有这个阶段",
    "this spec's stages: {names}": "这个 spec 的阶段：{names}",
    "--all shows the attention internals, which --record main does not keep; use --record all or stats, or name the ones to keep with --keep (e.g. --keep attn.scores)":
        "--all 要显示注意力内部，而 --record main 不保留它们；请用 --record all 或 stats，或用 --keep 指定要保留的（例如 --keep attn.scores）",
    "this run needs about {need!t}, over --max-memory {limit!a}. Largest: {parts!a}. To record less: {advice!T}; or raise --max-memory if this machine has the memory.":
        "这次运行约需 {need}，超过 --max-memory {limit}。最大的部分：{parts}。若要少记录：{advice}；或者，如果这台机器有足够的内存，就调高 --max-memory。",
    "{total} (recorded stages {a}, weights and inputs {b}, working memory {c}, interpreter {d})":
        "{total}（记录的阶段 {a}，权重和输入 {b}，工作内存 {c}，解释器 {d}）",
    "{total} (recorded stages {a}, weights and inputs {b}, working memory {c}, interpreter {d}, {extra!a})":
        "{total}（记录的阶段 {a}，权重和输入 {b}，工作内存 {c}，解释器 {d}，{extra}）",
    "--record main skips the attention internals (about {n}, {fits!t})": "--record main 不记录注意力内部（约 {n}，{fits}）",
    "--record stats keeps statistics of big arrays (about {n}, {fits!t})": "--record stats 对大数组只保留统计量（约 {n}，{fits}）",
    "--record all keeps every stage (about {n}, {fits!t})": "--record all 保留每个阶段（约 {n}，{fits}）",
    "keep fewer stages in full with --keep": "用 --keep 少保留一些完整的阶段",
    "none: even --record stats needs about {a}, {b} of it while {stage} runs (the largest array, {label}, has {n} values)":
        "都不行：即使 --record stats 也约需 {a}，其中 {b} 用在运行 {stage} 时（最大的数组 {label} 有 {n} 个值）",
    "lower T or B": "请减小 T 或 B",
    "{path}: ok, needs about {size} to run (--record {r})": "{path}: 通过，运行约需 {size}（--record {r}）",
    "cannot write {f}: {why}; nothing was written": "无法写入 {f}：{why}；没有写入任何内容",
    "cannot write there: {f} does not exist": "无法写入：{f} 不存在",
    "cannot write there: {f} is not a folder": "无法写入：{f} 不是文件夹",
    "{f} exists and is not an {kind} file; refusing to overwrite it (delete it or choose another name)":
        "{f} 已存在，且不是 {kind} 文件；拒绝覆盖它（请删除它或换一个名字）",
    "--lang {x}: expected one of zh | en (zh: the book's Chinese, en: English)": "--lang {x}：应为 zh | en 之一（zh：书中的中文，en：英文）",
    "--stage {name}: no stage of that name in {where}": "--stage {name}：{where} 中没有这个名字的阶段",
    "no stage is called {name}": "没有叫 {name} 的阶段",
    "no stage is called {name} (`tracer stages` lists every name)": "没有叫 {name} 的阶段（`tracer stages` 列出所有名字）",
    "{opt} {v} is out of range: {letter} = {a} in A, {b} in B (give 0 to {last})": "{opt} {v} 超出范围：A 中 {letter} = {a}，B 中为 {b}（请给 0 到 {last}）",
    "expected a finite number of 0 or more (such as 1e-9), received {v}": "应为 0 或更大的有限数（例如 1e-9），实际为 {v}",
    "--svg and --html name the same file {f}: give each its own name": "--svg 和 --html 指向同一个文件 {f}：请各给一个名字",
    "expected a file name such as {f}": "应为文件名，例如 {f}",
    "{opt} would overwrite the input {f}": "{opt} 会覆盖输入 {f}",
    "choose another file name": "请换一个文件名",
    "{f} is a directory": "{f} 是目录",
    "give a file name inside it, e.g. {g}": "请给出其中的文件名，例如 {g}",
    "cannot write there: the folder {f} is not writable": "无法写入：文件夹 {f} 不可写",
    "{f} exists and is not a regular file": "{f} 已存在，且不是普通文件",
    "cannot write {f}: {why}": "无法写入 {f}：{why}",
    "the model has no attention step (op mha or cross_mha), so there are no attention weights to draw":
        "模型中没有注意力步骤（op mha 或 cross_mha），所以没有注意力权重可画",
    "--attention-stage {name}: no attention step of that name": "--attention-stage {name}：没有这个名字的注意力步骤",
    "{path} has: {names} (or 'all')": "{path} 中有：{names}（或 'all'）",
    "give --preset NAME, one of:": "请给出 --preset NAME，可选：",
    "--preset {name}: no such preset": "--preset {name}：没有这个预设",
    "the presets are:": "预设有：",
    "already exists": "已经存在",
    "{f} already exists": "{f} 已经存在",
    "{f} exists and is not an {kind} file tracer wrote": "{f} 已存在，且不是 tracer 写的 {kind} 文件",
    "{f} exists and is not a {kind} file tracer wrote": "{f} 已存在，且不是 tracer 写的 {kind} 文件",
    "refusing to overwrite it (delete it, choose another name, or give --force to replace it)":
        "拒绝覆盖它（请删除它、换一个名字，或用 --force 替换它）",
    "{f} is a symbolic link": "{f} 是符号链接",
    "tracer never writes through or over a link (name the file itself, or remove the link)":
        "tracer 从不经由链接写入，也不覆盖链接（请给出文件本身，或删除链接）",
    "{f} exists and is read-only (mode {m})": "{f} 已存在，且是只读的（权限 {m}）",
    "tracer never replaces a file it may not write (make it writable, or choose another name)":
        "tracer 从不替换它无权写入的文件（请让它可写，或换一个名字）",
    "it appeared or changed during the run, and nothing was written": "它在运行期间出现或被改动，没有写入任何内容",
    "{a} and {b} name the same file {f}: give each its own name": "{a} 和 {b} 指向同一个文件 {f}：请各给一个名字",
    "the file keeps changing while tracer writes it": "tracer 写入期间文件一直在变",
    "nothing was written": "没有写入任何内容",
    "cannot write the output: {why}": "无法写出输出：{why}",
    "standard output is closed": "标准输出已关闭",
    "{opt} {text}: more than any machine has: at most 1 EiB (none turns the limit off)":
        "{opt} {text}：超过任何机器的内存：最多 1 EiB（none 表示不设上限）",
    "tracer never overwrites a file here (choose another name)": "tracer 不会覆盖这里已有的文件（请换一个名字）",
    "internal error: {what!a}": "内部错误：{what}",
    "internal error: {what!a} (a bug in tracer; please report it)": "内部错误：{what}（这是 tracer 的缺陷，请报告）",
    "this is a bug in tracer": "这是 tracer 的缺陷",
    "please report it with the spec and the command you ran (set TRACER_DEBUG=1 to see the traceback)":
        "请连同 spec 和所运行的命令一起报告（设置 TRACER_DEBUG=1 可以看到调用栈）",
    # -- saved traces (jsonin.py) and diff trouble --
    "not valid JSON: {why}": "不是合法的 JSON：{why}",
    "JSON nests too deeply to be a tracer trace": "JSON 嵌套太深，不会是 tracer 的运行记录",
    "is not a tracer trace (expected the JSON written by `tracer run SPEC --json`)": "不是 tracer 的运行记录（应为 `tracer run SPEC --json` 写出的 JSON）",
    "it has no {field} field": "其中没有 {field} 字段",
    "is the output of `tracer diff --json`, not a trace": "是 `tracer diff --json` 的输出，不是运行记录",
    "save a trace with `tracer run SPEC --json`": "请用 `tracer run SPEC --json` 保存运行记录",
    "{v} is not supported: this tracer reads schema_version {n}": "{v} 不受支持：此 tracer 读取 schema_version {n}",
    "missing dimension {k}": "缺少维度 {k}",
    "missing setting {k}": "缺少设置 {k}",
    "expected shape {a} as the stage's shape says, received {b}": "按阶段的 shape 应为 {a}，实际为 {b}",
    "a side has a violation, so its later stages are not comparable:": "有一侧出现违规，所以它之后的阶段无法比较：",
    "(give --keep-going to compare anyway, with NumPy's result recorded at each violation)": "（给出 --keep-going 仍然比较，每处违规记录 NumPy 的结果）",
    "{side} ({path}): {kind!t} violation: {fact!t}": "{side}（{path}）：{kind}违规：{fact}",
    # -- violations (kernels.py, executor.py) --
    "{a} {sa} and {b} {sb} differ": "{a} {sa} 与 {b} {sb} 不同",
    "an elementwise add needs equal shapes": "逐元素相加需要相同的 shape",
    "stretch the size-1 axes and return {shape} without complaint": "拉伸大小为 1 的轴，一声不响地返回 {shape}",
    "a residual add takes two arrays of exactly the same shape: same samples, same positions, same width (section 17.2)":
        "残差相加的两个数组必须 shape 完全相同：同一批样本、同一组位置、相同的宽度（17.2 节）",
    "{name} has shape {shape} where [{axis}] = [{n}] is due": "{name} 的 shape 是 {shape}，应为 [{axis}] = [{n}]",
    "repeat {name}'s single value across all {n} coordinates without complaint": "把 {name} 的单个值一声不响地重复到全部 {n} 个坐标",
    "{name} should hold one learned value per coordinate": "{name} 应当为每个坐标保存一个可学习的值",
    "a stretched value silently ties all {n} together": "被拉伸的单个值把 {n} 个坐标悄悄绑在一起",
    "{name} holds exactly one value per coordinate: [{axis}] = [{n}]": "{name} 每个坐标恰好一个值：[{axis}] = [{n}]",
    "LayerNorm statistics taken over {axis} ({n} entries) instead of {last} ({c} coordinates)":
        "LayerNorm 的统计量沿 {axis}（{n} 项）计算，而不是沿 {last}（{c} 个坐标）",
    "average over the {n} entries along {axis} and normalise without complaint": "沿 {axis} 对 {n} 项求平均并归一化，一声不响",
    "each position's result now depends on all {n} positions: position 0 changes when positions 1..{m} do, "
    "so the future leaks into earlier positions even though the attention mask is right (section 17.3)":
        "每个位置的结果现在依赖全部 {n} 个位置：位置 1..{m} 改变时位置 0 也会改变，"
        "即使注意力掩码正确，未来也泄漏到了较早的位置（17.3 节）",
    "each sample's result now depends on the other {n} sample of the batch: statistics mix samples":
        "每个样本的结果现在依赖这批中另外 {n} 个样本：统计量混合了样本",
    "each sample's result now depends on the other {n} samples of the batch: statistics mix samples":
        "每个样本的结果现在依赖这批中另外 {n} 个样本：统计量混合了样本",
    "the statistics mix entries that must be normalised separately": "统计量混合了必须分别归一化的项",
    "LayerNorm normalises each sample's each position on its own: statistics over C only (section 17.3)":
        "LayerNorm 对每个样本的每个位置分别归一化：统计量只沿 C 计算（17.3 节）",
    "softmax taken over queries (axis -2) instead of keys (axis -1)": "softmax 沿查询（axis -2）计算，而不是沿键（axis -1）",
    "normalise each key's column instead of each query's row, without complaint": "一声不响地归一化每个键的列，而不是每个查询的行",
    "a query's weights no longer sum to 1 over what it reads, and each weight depends on the other queries' scores, later positions included":
        "一个查询的权重在它读取的键上之和不再是 1，而且每个权重依赖其他查询的分数，包括后面的位置",
    "attention weights are a softmax over keys: each query's row sums to 1": "注意力权重是沿键的 softmax：每个查询的那一行之和为 1",
    "BatchNorm statistics taken over samples and positions (B x T = {b} x {t}) for each coordinate":
        "BatchNorm 对每个坐标跨样本和位置（B x T = {b} x {t}）计算统计量",
    "average each coordinate over the whole batch and every position, without complaint": "一声不响地把每个坐标在整批、所有位置上求平均",
    "one sample's result depends on the other samples and on later positions": "一个样本的结果依赖其他样本和后面的位置",
    "sentences differ in length and content, so the same position in different sentences is not comparable (guide, section 5)":
        "句子的长度和内容各不相同，不同句子的同一位置不可比较（导读第 5 节）",
    "text blocks normalise each sample's each position over its own C coordinates (LayerNorm)":
        "文本的块对每个样本的每个位置，沿它自己的 C 个坐标归一化（LayerNorm）",
    "one sample's update would be handed to all {n} samples, so the other sample would receive an update that is not its own":
        "一个样本的更新量会交给全部 {n} 个样本，另一个样本就会收到不属于自己的更新量",
    "one sample's update would be handed to all {n} samples, so the other {m} samples would receive an update that is not their own":
        "一个样本的更新量会交给全部 {n} 个样本，另外 {m} 个样本就会收到不属于自己的更新量",
    "one position's update would be handed to all {n} positions, so the other position would receive an update that is not its own":
        "一个位置的更新量会交给全部 {n} 个位置，另一个位置就会收到不属于自己的更新量",
    "one position's update would be handed to all {n} positions, so the other {m} positions would receive an update that is not their own":
        "一个位置的更新量会交给全部 {n} 个位置，另外 {m} 个位置就会收到不属于自己的更新量",
    "all {n} {what!t} would receive the same value": "全部 {n} 个{what}都会收到同一个值",
    "{last!T} (a residual adds each sample's and position's own update, section 17.2)": "{last}（残差相加的是每个样本、每个位置自己的更新量，17.2 节）",
    "each sample and position must add its own update": "每个样本、每个位置都必须加上自己的更新量",
    "first stage with non-finite values: {nan} NaN and {inf} Inf, the first at {where}":
        "第一个出现非有限值的阶段：{nan} 个 NaN 和 {inf} 个 Inf，第一个在 {where}",
    "every stage of a block must be finite": "块的每个阶段都必须是有限值",
    "carry on quietly, printing at most a RuntimeWarning": "悄悄继续计算，最多打印一条 RuntimeWarning",
    "NaN and Inf spread to every later stage that reads them": "NaN 和 Inf 会传到之后读取它们的每个阶段",
    "float32 overflows above about 3.4e38": "float32 超过约 3.4e38 就会溢出",
    "query position {rows} may read no key at all: the softmax of a row that is entirely -inf is 0/0 = NaN":
        "查询位置 {rows} 一个键也不能读：整行都是 -inf 的 softmax 是 0/0 = NaN",
    "query positions {rows} may read no key at all: the softmax of a row that is entirely -inf is 0/0 = NaN":
        "查询位置 {rows} 一个键也不能读：整行都是 -inf 的 softmax 是 0/0 = NaN",
    "{axis} = {t} positions but the learned table has T_max = {n} rows (indices 0 to {last})":
        "{axis} = {t} 个位置，但学习得到的位置表只有 T_max = {n} 行（索引 0 到 {last}）",
    "a learned position table has one row for each position 0 .. T_max-1, and no more": "学习得到的位置表为位置 0 .. T_max-1 各有一行，没有更多",
    "slice P[:{t}] to just {n} rows without complaint (and, for a one-row table, broadcast that row to every position)":
        "一声不响地把 P[:{t}] 切成只有 {n} 行（若表只有一行，则把这一行广播到每个位置）",
    "positions {a} to {b} were never trained": "位置 {a} 到 {b} 从未训练过",
    "the table cannot invent them (section 17.1)": "位置表无法凭空造出它们（17.1 节）",
    "cannot add {a} {sa} and {b} {sb}: the shapes do not match and NumPy cannot broadcast them":
        "无法把 {a} {sa} 和 {b} {sb} 相加：shape 不匹配，NumPy 也无法广播",
    "{name} has shape {shape}, expected [{axis}] = [{n}]": "{name} 的 shape 是 {shape}，应为 [{axis}] = [{n}]",
    "cannot multiply [..., {n}] by a [{a}, {b}] matrix": "无法用 [{a}, {b}] 矩阵乘 [..., {n}]",
    "stage {name} ({formula}): {why!t}": "阶段 {name}（{formula}）：{why}",
    # -- the run's notes --
    "not recorded: {names} (the run stopped at the violation at {stage}; --keep-going records every stage)":
        "未记录：{names}（运行在 {stage} 处的违规停止；--keep-going 会记录每个阶段）",
    "not recorded: {names} (the run stopped at the violation; --keep-going records every stage)":
        "未记录：{names}（运行在违规处停止；--keep-going 会记录每个阶段）",
    "{name} holds {n} sample (b = 0 to {last}): there is no sample b={b} to show": "{name} 只有 {n} 个样本（b = 0 到 {last}）：没有样本 b={b} 可显示",
    "{name} holds {n} samples (b = 0 to {last}): there is no sample b={b} to show": "{name} 只有 {n} 个样本（b = 0 到 {last}）：没有样本 b={b} 可显示",
    "{name!a}: preset pre-norm": "{name}：预设 Pre-Norm",
    "{name!a}: preset post-norm": "{name}：预设 Post-Norm",
    "{name!a}: the spec's own steps": "{name}：spec 自己的步骤",
    "{name!a}: encoder-decoder": "{name}：编码器—解码器",
    # -- --verify --
    "verify: largest |NumPy - reference| over all stages = {x} (every sample and position)":
        "verify：所有阶段上 |NumPy - 参考实现| 的最大值 = {x}（所有样本和位置）",
    "verify: largest |NumPy - reference| over all stages = {x}": "verify：所有阶段上 |NumPy - 参考实现| 的最大值 = {x}",
    "verify: partial: {reason!T}": "verify：部分核对：{reason}",
    "verify: skipped: {reason!T}": "verify：跳过：{reason}",
    "T = {t} runs past the position table's T_max = {n} rows": "T = {t} 超出了位置表的 T_max = {n} 行",
    "weights.{w} is {given} where {due} is due": "weights.{w} 是 {given}，应为 {due}",
    "step {formula} breaks the per-position contract the reference is written for": "步骤 {formula} 违反了参考实现所依据的逐位置约定",
    "the violation report is the check here": "这里由违规报告负责检查",
    "a full reference run takes ~{n} scalar operations (budget {b})": "完整的参考计算约需 {n} 次标量运算（预算 {b}）",
    "without a causal mask on every attention step each position reads all keys, so no prefix is exact on its own":
        "并非每个注意力步骤都有因果掩码，每个位置都读取全部键，所以没有哪个前缀能单独精确算出",
    "even one position takes ~{n} scalar operations (budget {b})": "即使一个位置也约需 {n} 次标量运算（预算 {b}）",
    "under the causal mask positions 0..{k} of sample 0 are exact on their own, so those are verified":
        "在因果掩码下，样本 0 的位置 0..{k} 可以单独精确算出，所以核对这些位置",
    "the run flagged a {kind!t} violation at stage {stage}; the reference only computes blocks that keep every contract":
        "本次运行在阶段 {stage} 标记了{kind}违规；参考实现只计算遵守全部约定的块",
    "the run flagged a {kind!t} violation at stage {stage} ({reason!T}); the reference only computes blocks that keep every contract":
        "本次运行在阶段 {stage} 标记了{kind}违规（{reason}）；参考实现只计算遵守全部约定的块",
    # -- formulas (tracer stages) --
    "E[token id]: one row of the token table E per position": "E[token id]：每个位置取 token 表 E 的一行",
    "the matrix given as input.x": "input.x 给出的矩阵",
    "P[0:T]: rows 0 .. T-1 of the learned table P [T_max,C]": "P[0:T]：学习得到的位置表 P [T_max,C] 的第 0 .. T-1 行",
    "{a} + {b} (the position table added to every sample)": "{a} + {b}（位置表加到每个样本上）",
    "gamma * ({a} - mean) / sqrt(var + eps) + beta, mean and var over the C coordinates of each row":
        "gamma * ({a} - mean) / sqrt(var + eps) + beta，mean 和 var 在每一行的 C 个坐标上计算",
    "gamma * {a} / sqrt(mean({a}^2) + eps), over the C coordinates of each row (no mean subtracted, no beta)":
        "gamma * {a} / sqrt(mean({a}^2) + eps)，在每一行的 C 个坐标上计算（不减均值，没有 beta）",
    "gamma * ({a} - mean) / sqrt(var + eps) + beta, mean and var over samples and positions (B and T)":
        "gamma * ({a} - mean) / sqrt(var + eps) + beta，mean 和 var 跨样本和位置（B 和 T）计算",
    "concat over heads h of softmax(mask(Q_h K_h^T / sqrt(d))) V_h, times W_O, plus b_O; Q = {a} W_Q + b_Q, K = {a} W_K + b_K, V = {a} W_V + b_V":
        "把各头 h 的 softmax(mask(Q_h K_h^T / sqrt(d))) V_h 拼接，乘 W_O，加 b_O；Q = {a} W_Q + b_Q, K = {a} W_K + b_K, V = {a} W_V + b_V",
    "as MHA, with Q = {a} W_Q + b_Q and K, V from {b} (the encoder output); no mask":
        "同 MHA，Q = {a} W_Q + b_Q，K、V 来自 {b}（编码器的输出）；无掩码",
    "{a} + {b}, the same shape on both sides (a residual add)": "{a} + {b}，两边 shape 相同（残差相加）",
    "{a}[start:stop] along one axis": "沿一个轴取 {a}[start:stop]",
    "{a} E^T (head: tied) or {a} W_head (head: separate)": "{a} E^T（head: tied）或 {a} W_head（head: separate）",
    "exp({a} - max) / sum over V of exp({a} - max)": "exp({a} - max) / 沿 V 求和的 exp({a} - max)",
    "GELU({a} W_1 + b_1), GPT-2's tanh approximation z/2 (1 + tanh(sqrt(2/pi) (z + 0.044715 z^3)))":
        "GELU({a} W_1 + b_1)，GPT-2 的 tanh 近似 z/2 (1 + tanh(sqrt(2/pi) (z + 0.044715 z^3)))",
    "{a} W_Q + b_Q, split into H heads: head h takes columns h*d .. (h+1)*d - 1": "{a} W_Q + b_Q，拆成 H 个头：头 h 取第 h*d .. (h+1)*d - 1 列",
    "{a} W_K + b_K, split into heads": "{a} W_K + b_K，拆成多个头",
    "{a} W_V + b_V, split into heads": "{a} W_V + b_V，拆成多个头",
    "{a} W_K + b_K, split into H_kv heads of width d": "{a} W_K + b_K，拆成 H_kv 个宽为 d 的头",
    "{a} W_V + b_V, split into H_kv heads of width d": "{a} W_V + b_V，拆成 H_kv 个宽为 d 的头",
    "query head h reads head h // (H / H_kv)": "查询头 h 读取第 h // (H / H_kv) 个头",
    "pair i = {pair} of each head turned by the angle t * base^(-2i/d) at position t":
        "每个头的第 i 对坐标 {pair} 在位置 t 转过角度 t * base^(-2i/d)",
    "Q_h K_h^T / sqrt(d), one row per query, one column per key": "Q_h K_h^T / sqrt(d)，每个查询一行，每个键一列",
    "softmax over keys of the scores, masked keys set to -inf first (so their weight is 0)":
        "对分数沿键做 softmax，先把被遮挡的键设为 -inf（所以它们的权重为 0）",
    "weights_h V_h for every head, concatenated back to width C": "每个头的 weights_h V_h，拼接回宽度 C",
    "as the layer stage of that name": "同名的层阶段",
    # -- tracer probe --
    "the block's mask is {mask}, not causal: later positions may be read by design": "块的掩码是 {mask}，不是 causal：按设计可以读取后面的位置",
    "T = 1: there is no later position to perturb": "T = 1：没有后面的位置可以扰动",
    "T = 1: there is nothing to permute": "T = 1：没有可以重排的东西",
    "stage {stage} is NaN in both runs at {n} of its {m} compared values (stages with such values: {k}): NaN cannot show a change, so the probe "
    "cannot tell whether the property holds; probe a spec whose run has no NaN":
        "阶段 {stage} 在两次运行中都是 NaN（比较的 {m} 个值中有 {n} 个；有此类值的阶段：{k}）：NaN 显示不出变化，"
        "所以探测无法判断性质是否成立；请探测运行中没有 NaN 的 spec",
    "the probe cannot measure {names}: {evidence!T}": "探测无法测量{names}：{evidence}",
    "an encoder-decoder has two inputs; Example 17.1's property is about one block's rows":
        "编码器—解码器有两份输入；例 17.1 的性质说的是一个块的各行",
    "perturbing {later!t} changed stage {stage} at {earlier!t} by up to {d}: {who!t} on later ones, although the mask is causal":
        "扰动{later}后，阶段 {stage} 在{earlier}处改变了最多 {d}：{who}后面的位置，尽管掩码是因果的",
    "perturbing the positions after t changed no stage at positions 0..t (checked t = {ts}; largest change {d})":
        "扰动 t 之后的位置，没有任何阶段在位置 0..t 处改变（检查了 t = {ts}；最大变化 {d}）",
    "with positions and mask removed, moving row {r} of X to the front did not move stage {stage} the same way (largest difference {d})":
        "去掉位置和掩码后，把 X 的第 {r} 行移到最前面，阶段 {stage} 没有做同样的移动（最大差 {d}）",
    "moving row {r} of X to the front moved every per-position stage's rows the same way (largest difference {d}).":
        "把 X 的第 {r} 行移到最前面，每个逐位置阶段的行都做了同样的移动（最大差 {d}）。",
    "moving row {r} of X to the front moved every per-position stage's rows the same way (largest difference {d}). "
    "Checked with positions and mask removed, as Example 17.1 states it; the spec's own positions and mask are what break it on purpose.":
        "把 X 的第 {r} 行移到最前面，每个逐位置阶段的行都做了同样的移动（最大差 {d}）。"
        "按例 17.1 的说法，检查时去掉了位置和掩码；spec 自己的位置和掩码正是有意打破这一性质的东西。",
    "causality": "因果性",
    # -- tracer diff --
    "Structure: the same {n} steps ({names})": "结构：相同的 {n} 个步骤（{names}）",
    "{name} reads {a} in A, {b} in B": "{name} 在 A 中读取 {a}，在 B 中读取 {b}",
    "{label} normalises after each residual add: {norms}": "{label} 在每次残差相加之后归一化：{norms}",
    "{label} normalises after a residual add: {norms}": "{label} 在一次残差相加之后归一化：{norms}",
    "{label} normalises only what the sublayers read": "{label} 只归一化子层读取的输入",
    "the residual stream is never normalised": "残差路径本身从不归一化",
    "the residual stream is never normalised: {where!t}": "残差路径本身从不归一化：{where}",
    "{name} = {expr} only in A": "{name} = {expr} 只在 A 中",
    "{name} = {expr} only in B": "{name} = {expr} 只在 B 中",
    "{name} = {a} in A, {b} in B": "{name} 在 A 中 = {a}，在 B 中 = {b}",
    "{name} = {a} in A, {b} in B (weights {wa} in A, {wb} in B)": "{name} 在 A 中 = {a}，在 B 中 = {b}（权重：A 中 {wa}，B 中 {wb}）",
    "step order differs: A {a}; B {b}": "步骤顺序不同：A {a}；B {b}",
    "{label}: {path} (spec, {name!a})": "{label}：{path}（spec，{name}）",
    "{label}: {path} (trace, {name!a})": "{label}：{path}（运行记录，{name}）",
    "Weights: all {n} the same within {tol}": "权重：全部 {n} 个在 {tol} 内相同",
    "Weights that differ ({rest!t})": "不同的权重（{rest}）",
    "Stages, aligned by name (equal: |A - B| <= atol + rtol * max(|A|, |B|), {tol})":
        "各阶段，按名字对齐（相等：|A - B| <= atol + rtol * max(|A|, |B|)，{tol}）",
    "weights not compared: {who} holds no weights (save a trace with `tracer run SPEC --json --with-weights` to include them)":
        "未比较权重：{who} 不含权重（用 `tracer run SPEC --json --with-weights` 保存运行记录即可包含）",
    "{who} was saved without --all: attention internals are not compared": "{who} 保存时没有 --all：不比较注意力内部",
    "{label} has {letter} = {n}: no value to show at {opt} {v}": "{label} 的 {letter} = {n}：{opt} {v} 处没有值可显示",
    "same: all {n} stages agree within {tol}": "相同：全部 {n} 个阶段在 {tol} 内一致",
    "same structure and settings": "结构和设置相同",
    "same structure and settings (weights not compared)": "结构和设置相同（未比较权重）",
    "first diverging stage: {name} ({status!t})": "第一个出现分歧的阶段：{name}（{status}）",
    "first diverging stage: {name} ({status!t}, largest |A - B| = {d} at {where})": "第一个出现分歧的阶段：{name}（{status}，最大 |A - B| = {d}，位于 {where}）",
    "first diverging stage: {name} ({status!t}, largest |A - B| = {d} at {where}": "第一个出现分歧的阶段：{name}（{status}，最大 |A - B| = {d}，位于 {where}",
    "at b={b}, t={t} the two agree)": "在 b={b}, t={t} 处两者一致）",
    "{n} of {m} stages differ": "{m} 个阶段中有 {n} 个不同",
    "all {n} stages agree within {tol}": "全部 {n} 个阶段在 {tol} 内一致",
    "structure differs": "结构不同",
    "settings differ: {what!t}": "设置不同：{what}",
    # -- tracer diff against your own arrays (activations.py, diff.py) --
    "{label}: {path} (arrays, {n} arrays)": "{label}：{path}（数组，{n} 个）",
    "{label}: {path} (arrays, {n} array)": "{label}：{path}（数组，{n} 个）",
    "Compared {n} arrays of {label} with the stages of the same name in {ref}: {names}": "把 {label} 的 {n} 个数组与 {ref} 中同名的阶段比较：{names}",
    "named with --map: {pairs}": "由 --map 命名：{pairs}",
    "{label} gives {names} without the batch axis: read with B = 1": "{label} 给出的 {names} 没有批次轴：按 B = 1 读取",
    "{ref} has {a}, {path} has {b} (expected {e}, or {f} without the batch axis)": "{ref} 是 {a}，{path} 是 {b}（应为 {e}，或去掉批次轴的 {f}）",
    "{ref} has {a}, {path} has {b} (expected {e})": "{ref} 是 {a}，{path} 是 {b}（应为 {e}）",
    "{label} holds arrays that match no stage of {ref}: {names} (name them with --map THEIRS=STAGE)":
        "{label} 中有与 {ref} 的任何阶段都对不上的数组：{names}（用 --map THEIRS=STAGE 命名）",
    "{label} kept {names} as statistics only (--record stats): not compared": "{label} 只保存了 {names} 的统计量（--record stats）：不比较",
    "same: all {n} recorded stages agree within {tol}": "相同：全部 {n} 个已记录的阶段在 {tol} 内一致",
    "same: the one recorded stage agrees within {tol}": "相同：唯一一个已记录的阶段在 {tol} 内一致",
    "{n} stages not recorded": "{n} 个阶段未记录",
    "{n} stage not recorded": "{n} 个阶段未记录",
    "{n} of {m} recorded stages differ": "{m} 个已记录的阶段中有 {n} 个不同",
    "first diverging stage: {name} ({status!t}, largest |A - B| = {d} at {where}: A {va}, B {vb})":
        "第一个出现分歧的阶段：{name}（{status}，最大 |A - B| = {d}，位于 {where}：A {va}，B {vb}）",
    "expected THEIRS=OURS, e.g. --map ln1=norm1": "应为 THEIRS=OURS，例如 --map ln1=norm1",
    "no array matches a stage of {ref}": "没有一个数组与 {ref} 的阶段对得上",
    "not a readable .npz archive ({why!a})": "不是可读取的 .npz 归档（{why}）",
    # -- tracer graph --
    "before the block ": "进入块之前",
    "the residual stream, into this path": "残差路径上的值，进入这条路径",
    "x goes two ways: through the steps on the rail, and unchanged into the add.": "x 分两路：一路经过竖线上的各步骤，一路原样进入相加。",
    "{x} goes two ways: through the steps on the rail, and unchanged into the add.": "{x} 分两路：一路经过竖线上的各步骤，一路原样进入相加。",
    "Positions are added here, before the block: a position is not a token appended to the sequence.":
        "位置在这里、进入块之前相加：位置不是往序列末尾再加一个 token。",
    "Rotary positions: no position vectors are added; q and k are turned inside each attention.":
        "旋转位置编码：不加位置向量；q 和 k 在每次注意力内部转动。",
    "No positions: the block cannot tell the order of the tokens.": "没有位置信息：块分不出 token 的顺序。",
    "{name} is the memory: every cross-attention of the decoder reads its keys and values from it.":
        "{name} 就是 memory：解码器的每个交叉注意力都从它读取键和值。",
    "{stack}: before the block": "{stack}：进入块之前",
    "after the block": "块之后",
    "after the stack": "堆叠之后",
    "{stack}: after the stack": "{stack}：堆叠之后",
    "{stack}: after the block": "{stack}：块之后",
    "no residual add: the steps in order": "没有残差相加：按顺序的各步骤",
    "{layer!t}: no residual add: the steps in order": "{layer}：没有残差相加：按顺序的各步骤",
    "{a} to {b}: {n} more layers, the same steps as {c}, each with its own weights": "{a} 到 {b}：另外 {n} 层，步骤与 {c} 相同，各有自己的权重",
    "{order!t}, {n} layer": "{order}，{n} 层",
    "{order!t}, {n} layers": "{order}，{n} 层",
    "the spec's own steps": "spec 自己的步骤",
    "rows of E for the tokens": "token 对应的 E 的行",
    "rows of E for the {stream} tokens": "{stream} token 对应的 E 的行",
    "input.{stream}, as given": "input.{stream}，原样给出",
    "rows 0 .. {pos}-1 of P": "P 的第 0 .. {pos}-1 行",
    "softmax({x}) over V": "沿 V 做 softmax({x})",
    "rms_norm({x}) over C": "沿 C 做 rms_norm({x})",
    "batch_norm({x}) over B and T": "跨 B 和 T 做 batch_norm({x})",
    "sin / cos of the position, base {base}": "位置的 sin / cos，底数 {base}",
    "{x} W + b, to width {out}": "{x} W + b，宽度变为 {out}",
    "{x}, {axis} {a}:{b} (the axis kept)": "{x}，{axis} {a}:{b}（保留该轴）",
    "{mask!t}; softmax over keys": "{mask}；沿键做 softmax",
    "{mask!t}; softmax over queries": "{mask}；沿查询做 softmax",
    "layer_norm({x}) over {axis}": "沿 {axis} 做 layer_norm({x})",
    "{kind!t} violation when run: {fact!T}": "运行时是{kind}违规：{fact}",
    "FFN hidden layer, inside the step (not recorded)": "FFN 隐藏层，在步骤内部（未记录）",
    "{x} W_Q, W_K, W_V; split into H = {h} heads": "{x} W_Q, W_K, W_V；拆成 H = {h} 个头",
    "{x} W_Q, W_K, W_V; split into H = {h} heads; q, k turned (rotary)": "{x} W_Q, W_K, W_V；拆成 H = {h} 个头；q、k 转动（旋转位置编码）",
    "queries, keys, values, split into heads": "查询、键、值，拆成多个头",
    "queries, keys, values, split into heads, turned by rotary positions": "查询、键、值，拆成多个头，经旋转位置编码转动",
    "{x} W_Q; split into heads": "{x} W_Q；拆成多个头",
    "{m} W_K, W_V; split into heads": "{m} W_K, W_V；拆成多个头",
    "{m} W_K, W_V; split into H_kv = {hkv} heads, each read by H / H_kv = {g} query heads":
        "{m} W_K, W_V；拆成 H_kv = {hkv} 个头，每个由 H / H_kv = {g} 个查询头共用",
    "keys and values from {m}": "来自 {m} 的键和值",
    "weights @ v, per head": "weights @ v，每个头分别计算",
    "values mixed by the weights (not recorded)": "按权重混合的值（未记录）",
    "concatenate the heads": "拼接各头",
    "{e} (tied: logits use Eᵀ)": "{e}（共享：logits 用 Eᵀ）",
    # -- tracer run --attention --
    "{name}: not recorded": "{name}：未记录",
    "{name}: not recorded (the run stopped at the violation at {stage}; --keep-going records what NumPy would do)":
        "{name}：未记录（运行在 {stage} 处的违规停止；--keep-going 会记录 NumPy 的结果）",
    "cross-attention, no mask: every target position reads every source position": "交叉注意力，无掩码：每个目标位置读取每个源位置",
    "causal mask: a query reads only its own and earlier positions": "因果掩码：查询只读取自己和之前的位置",
    "no mask: every query reads every key": "无掩码：每个查询读取每个键",
    "explicit mask from the spec (block.mask)": "spec 给出的显式掩码（block.mask）",
    "softmax over queries (an axis violation): each column sums to 1, not each row": "沿查询做 softmax（轴违规）：每一列之和为 1，而不是每一行",
    "more than {n} keys: shades only, no numbers (tracer run --all --json has every value)": "键超过 {n} 个：只画深浅，不写数字（tracer run --all --json 有每个值）",
    "{nq} × {nk} cells per head are too many to print: each cell is the mean weight of a block of {rb} {q!t} × {cb} {k!t} ({r} × {c} blocks)":
        "每个头 {nq} × {nk} 个格子，太多，无法逐个打印：每格是一块 {rb} 个{q} × {cb} 个{k}的平均权重（{r} × {c} 块）",
    "{nq} × {nk} cells per head are too many to print: each cell is the mean weight of a block of {rb} {q!t} × {cb} {k!t} ({r} × {c} blocks, the last ones smaller)":
        "每个头 {nq} × {nk} 个格子，太多，无法逐个打印：每格是一块 {rb} 个{q} × {cb} 个{k}的平均权重（{r} × {c} 块，最后几块较小）",
    "shades are relative to the largest mean in each head": "深浅相对于每个头中最大的均值",
    "a cell is · only when its whole block is masked": "只有整块都被遮挡时格子才是 ·",
    # slips of a Chinese keyboard and of the tab key (yamlslips)
    "{what!t} '{char}' ({code}), as a Chinese keyboard types it; YAML reads only ASCII punctuation: type {fix!t} instead":
        "{what} '{char}'（{code}），是中文输入法打出的；YAML 只认 ASCII 标点：请改为 {fix}",
    "{what!t} ({code}), as a Chinese keyboard types it; YAML reads only ASCII punctuation: type {fix!t} instead":
        "{what}（{code}），是中文输入法打出的；YAML 只认 ASCII 标点：请改为 {fix}",
    "a tab at {line}:{col}; YAML indents with spaces": "第 {line} 行第 {col} 列是制表符（Tab）；YAML 只用空格缩进",
    # examples/coursework/grade.py's notes
    "lost: {parts}": "失分：{parts}",
    "{kind!t} violation: {rest!T}": "{kind}违规：{rest}",
    # tracer check
    "right: {stage} at b={b}, t={t} is {v} to {p} decimals": "正确：{stage} 在 b={b}, t={t} 处是 {v}（精确到 {p} 位小数）",
    "wrong: {stage} at b={b}, t={t} has {n} numbers (the stage is {shape}); you gave {m}": "错误：{stage} 在 b={b}, t={t} 处有 {n} 个数（该阶段是 {shape}）；你给了 {m} 个",
    "wrong: {stage} at b={b}, t={t}: entry {i} of {v} differs at {p} decimals (counting from 0)": "错误：{stage} 在 b={b}, t={t} 处：{v} 的第 {i} 项在 {p} 位小数上不同（从 0 数起）",
    "wrong: {stage} at b={b}, t={t}: entries {i!a} of {v} differ at {p} decimals (counting from 0)": "错误：{stage} 在 b={b}, t={t} 处：{v} 的第 {i} 项在 {p} 位小数上不同（从 0 数起）",
    "cannot check {stage} at b={b}, t={t}: the run stopped at a {stopped!t} before reaching it (tracer run {path})":
        "无法检查 {stage} 在 b={b}, t={t} 处的值：运行在到达它之前停在了{stopped}（tracer run {path}）",
    "--expect {text!a}: expected a list of numbers such as [1, -2, -1]": "--expect {text}：应为数的列表，例如 [1, -2, -1]",
    "{option} {n} is out of range: {axis} = {size} ({what!t} 0 to {last}, or -1 to -{size} from the end)":
        "{option} {n} 超出范围：{axis} = {size}（{what} 0 到 {last}，或从末尾数 -1 到 -{size}）",
}


# Fragments: only ever the text of a translated field ({x!t}), never a whole line, so a loose
# pattern such as 'dims.{letter} = {n}' cannot take over a sentence.
FRAGMENTS: dict[str, str] = {
    **KINDS,
    "{kind!t} violation at stage {stage}": "阶段 {stage} 的{kind}违规",  # where `tracer check` found the run stopped
    "the end of the run": "运行的末尾",
    "positions": "位置",
    "samples": "样本",
    "a full-width comma": "全角逗号",
    "a full-width colon": "全角冒号",
    "a full-width semicolon": "全角分号",
    "a full-width bracket": "全角方括号",
    "a full-width brace": "全角花括号",
    "a full-width parenthesis": "全角圆括号",
    "a full-width space": "全角空格",
    "':' and a space": "':' 加一个空格",
    "',' (YAML separates items with commas)": "','（YAML 用逗号分隔各项）",
    "a space": "一个空格",
    "{a} or {b}": "{a} 或 {b}",
    "layer {name}": "层 {name}",
    "encoder layer {name}": "编码器层 {name}",
    "decoder layer {name}": "解码器层 {name}",
    "encoder layer": "编码器层",
    "decoder layer": "解码器层",
    "{n} weights": "{n} 个权重",
    "fits": "放得下",
    "still too much": "仍然太多",
    "queries": "查询",
    "query": "查询",
    "keys": "键",
    "key": "键",
    "{norm} feeds {reader}": "{norm} 送入 {reader}",
    "{a} or {b} or {c}": "{a}、{b} 或 {c}",
    "a whole number": "整数",
    "a number": "数",
    "a mapping": "一个映射（mapping）",
    "a list": "一个列表",
    "nothing (null)": "空值（null）",
    "text {v}": "文本 {v}",
    "boolean {v}": "布尔值 {v}",
    "one of {options}": "{options} 之一",
    "a mapping of {what!t}": "{what}的映射",
    "{name} weights": "{name} 的权重",
    "block settings": "block 设置",
    "spec sections": "spec 各部分",
    "dimensions": "维度",
    "step fields": "步骤字段",
    "input": "输入",
    "encoder-decoder input": "编码器—解码器的输入",
    "a whole number from {lo} to {hi}": "{lo} 到 {hi} 之间的整数",
    "a whole number (token id)": "整数（token id）",
    "a token id or a word of the vocab": "token id 或词表中的词",
    "a single value": "单个值",
    "a single number": "单个数",
    "{n} level of nesting": "{n} 层嵌套",
    "{n} levels of nesting": "{n} 层嵌套",
    "a list of words": "词的列表",
    "a word": "一个词",
    "text": "文本",
    "an empty list": "空列表",
    "numbers": "数",
    "a positive number such as 1e-5": "正数，例如 1e-5",
    "a number above 1 such as 10000": "大于 1 的数，例如 10000",
    "true or false": "true 或 false",
    "causal, none, or a square [T,T] matrix of 0 and 1": "causal、none，或由 0 和 1 组成的 [T,T] 方阵",
    "0 (masked) or 1 (may attend)": "0（遮挡）或 1（可以关注）",
    "a list of token ids [T] or one list per sample [B,T]": "token id 列表 [T]，或每个样本一个列表 [B,T]",
    "a [T,C] or [B,T,C] matrix": "[T,C] 或 [B,T,C] 矩阵",
    "rows of width C = {c}": "宽度为 C = {c} 的行",
    "rows of width {c}": "宽度为 {c} 的行",
    "a [T,T] = [{n},{n}] mask": "[T,T] = [{n},{n}] 的掩码",
    "{n} rows": "{n} 行",
    "{n} entries": "{n} 项",
    "a list of {n} layer mapping (one per layer)": "{n} 个层映射组成的列表（每层一个）",
    "a list of {n} layer mappings (one per layer)": "{n} 个层映射组成的列表（每层一个）",
    "a stage name of letters, digits, _ and -": "由字母、数字、_ 和 - 组成的阶段名",
    "a list of steps such as {example!a}": "步骤列表，例如 {example}",
    "token ids or words": "token id 或词",
    "weights": "权重",
    "dims": "维度",
    "an object {fields}": "对象 {fields}",
    "a nested list of numbers": "数的嵌套列表",
    "whole numbers of 0 or more": "0 或更大的整数",
    "a whole number of 1 or more": "1 或更大的整数",
    "a stage name": "阶段名",
    "dims.{letter} = {n}": "dims.{letter} = {n}",
    "weight group": "权重组",
    "weight": "权重",
    "coordinates": "坐标",
    "hidden units": "隐藏单元",
    "heads": "头",
    "none equal": "没有相等的",
    "{n} other equal within {tol}": "另有 {n} 个在 {tol} 内相等",
    "{n} others equal within {tol}": "另有 {n} 个在 {tol} 内相等",
    "position {a}": "位置 {a}",
    "positions {a}..{b}": "位置 {a}..{b}",
    "position 0 depends": "位置 0 依赖",
    "positions up to {t} depend": "位置 0..{t} 依赖",
    "no mask": "无掩码",
    "causal mask": "因果掩码",
    "explicit mask": "显式掩码",
}


# tracer graph: the residual paths of a layer, 'first' to 'tenth' (render_graph.ORDINALS)
for _n, _word in enumerate(("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth")):
    _zh = "第" + "一二三四五六七八九十"[_n] + "条残差路径"
    TEMPLATES[f"{_word} residual path: {{rest!a}}"] = _zh + "：{rest}"
    TEMPLATES[f"{{layer!t}}: {_word} residual path: {{rest!a}}"] = "{layer}：" + _zh + "：{rest}"
for _mask, _mask_zh in (("causal mask", "因果掩码"), ("no mask", "无掩码"), ("explicit mask", "显式掩码")):
    TEMPLATES[f"{{call}}, {_mask}"] = f"{{call}}，{_mask_zh}"
    TEMPLATES[f"{{call}}, {_mask}, rotary base {{base}}"] = f"{{call}}，{_mask_zh}，旋转位置编码底数 {{base}}"
    TEMPLATES[f"{{call}}, {_mask}, softmax over queries"] = f"{{call}}，{_mask_zh}，沿查询做 softmax"
    TEMPLATES[f"{{call}}, {_mask}, rotary base {{base}}, softmax over queries"] = f"{{call}}，{_mask_zh}，旋转位置编码底数 {{base}}，沿查询做 softmax"
    TEMPLATES[f"{{call}}, {_mask}, rotary base {{base}}, pairs {{pairs}}"] = f"{{call}}，{_mask_zh}，旋转位置编码底数 {{base}}，坐标对 {{pairs}}"
    TEMPLATES[f"{{call}}, {_mask}, rotary base {{base}}, pairs {{pairs}}, softmax over queries"] = \
        f"{{call}}，{_mask_zh}，旋转位置编码底数 {{base}}，坐标对 {{pairs}}，沿查询做 softmax"

# The summary line of many specs (runs.Summary.line), every plural.
for _s in ("spec", "specs"):
    for _v in ("with a violation", "with violations"):
        for _e in ("error", "errors"):
            TEMPLATES[f"{{n}} {_s}: {{ok}} ok, {{v}} {_v}, {{e}} {_e}; exit code {{code}}"] = \
                "{n} 个 spec：{ok} 个通过，{v} 个有违规，{e} 个出错；退出码 {code}"


# -- the catalogue of messages (tracer.messages): keyed by the English template --------------------

def _plain(key: str) -> str:
    return key.replace("!t}", "}").replace("!T}", "}").replace("!a}", "}")


MESSAGES: dict[str, str] = {_plain(k): v for k, v in {**FRAGMENTS, **TEMPLATES}.items()}
# nmsg(singular, plural, n): one Chinese form for both
PLURALS: dict[tuple[str, str], str] = {}
# join(parts, sep): the separator in Chinese
SEPARATORS = {"; ": "；", ", ": "，"}

# >>> messages made with msg()
MESSAGES.update({
    '{option} {value} is out of range: give 0 to {most}': '{option} {value} 超出范围：请给 0 到 {most}',
    'a position table is given but {sec}.positions is {positions}': '给了位置表，但 {sec}.positions 是 {positions}',
    'an output head matrix is given but {sec}.head is {head} (use head: separate)': '给了输出层矩阵，但 {sec}.head 是 {head}（请用 head: separate）',
    'expected text, received {got}': '应为文本，实际为{got}',
    'expected true or false, received {got}': '应为 true 或 false，实际为{got}',
    'expected a mapping of weights, received {got}': '应为权重的映射，实际为{got}',
    'H = {H} must divide C = {C} (each head has width d = C / H)': 'H = {H} 必须整除 C = {C}（每个头的宽度是 d = C / H）',
    'H_kv = {H_kv} must divide H = {H} (each key/value head serves H / H_kv query heads)': 'H_kv = {H_kv} 必须整除 H = {H}（每个键/值头供 H / H_kv 个查询头共用）',
    'rotary positions rotate pairs of coordinates: d = C / H = {x} must be even': '旋转位置编码成对转动坐标：d = C / H = {x} 必须是偶数',
    'token id {max_token} is out of range: the embedding table has V = {V} rows (ids 0 to {x})': 'token id {max_token} 超出范围：嵌入表有 V = {V} 行（id 为 0 到 {x}）',
    'expected one target id per sample and position [B,T] = [{B},{T}], received [{shape},{shape2}]': '应为每个样本、每个位置一个目标 id，[B,T] = [{B},{T}]，实际为 [{shape},{shape2}]',
    'expected a list of steps such as {name: norm1, op: layer_norm, in: x, weights: norm1}, received nothing (null)': '应为步骤列表，例如 {name: norm1, op: layer_norm, in: x, weights: norm1}，实际为空值（null）',
    'expected a positive number such as 1e-5, received {got}': '应为正数，例如 1e-5，实际为{got}',
    'expected a number above 1 such as 10000, received {got}': '应为大于 1 的数，例如 10000，实际为{got}',
    'position_base is for sinusoidal or rotary positions, but positions is {positions}': 'position_base 用于正余弦或旋转位置编码，但 positions 是 {positions}',
    'rotary_pairing is for rotary positions, but positions is {positions}': 'rotary_pairing 用于旋转位置编码，但 positions 是 {positions}',
    'expected causal, none, or a square [T,T] matrix of 0 and 1, received {shape}': '应为 causal、none，或由 0 和 1 组成的 [T,T] 方阵，实际为{shape}',
    'expected a list of steps such as {name: norm1, op: layer_norm, in: x, weights: norm1}, received {got}': '应为步骤列表，例如 {name: norm1, op: layer_norm, in: x, weights: norm1}，实际为{got}',
    'expected a stage name of letters, digits, _ and -, received {got}': '应为由字母、数字、_ 和 - 组成的阶段名，实际为{got}',
    'expected a list of token ids [T] or one list per sample [B,T], received {shape}': '应为 token id 列表 [T]，或每个样本一个列表 [B,T]，实际为{shape}',
    'expected a [T,C] or [B,T,C] matrix, received {shape}': '应为 [T,C] 或 [B,T,C] 矩阵，实际为{shape}',
    'source has B = {B_s} samples but target has B = {B_t}': 'source 有 B = {B_s} 个样本，但 target 有 B = {B_t} 个',
    'expected {label}, received {shape}': '应为{label}，实际为{shape}',
    'expected the path of a checkpoint file or model folder, received {got}': '应为 the path of a checkpoint file 或 model folder，实际为{got}',
    'expected the path of a .npz, .npy, .safetensors or .pt file, received {got}': '应为 the path of a .npz, .npy, .safetensors 或 .pt file，实际为{got}',
    'expected the name of a tensor in the file, received {got}': '应为文件中某个张量的名字，实际为{got}',
    'expected a whole number (token id), received {value}': '应为整数（token id），实际为{value}',
    'received {value} (not finite); add allow_nonfinite: true to study NaN and Inf on purpose': '实际为 {value}（不是有限值）；若要有意研究 NaN 和 Inf，请加上 allow_nonfinite: true',
    'expected a whole number, received {got}': '应为整数，实际为{got}',
    "expected a word (text), received the number {got}; quote it ('{w}') if it is a word: unquoted numbers in tokens are ids": "应为词（文本），实际为数字 {got}；如果它是词，请加引号（'{w}'）：tokens 里不加引号的数字是 id",
    'expected a word, received {got}': '应为一个词，实际为{got}',
    'expected rows of 0 and 1, received an empty list': '应为 rows of 0 and 1，实际为空列表',
    'expected 0 (masked) or 1 (may attend), received {got}': '应为 0（遮挡）或 1（可以关注），实际为{got}',
    'a step needs {key} (e.g. {name: norm1, op: layer_norm, in: x, weights: norm1})': '步骤需要 {key}（例如 {name: norm1, op: layer_norm, in: x, weights: norm1}）',
    '{op} needs weights: the name of its weight group (e.g. weights: {x})': '{op} 需要 weights：它的权重组名（例如 weights: {x}）',
    '{weights} is a reserved name; choose another weight group name': '{weights} 是保留名；请换一个权重组名',
    'expected a token id or a word of the vocab, received {got}': '应为 token id 或词表中的词，实际为{got}',
    'V = {V} but the vocab has {n} words': 'V = {V}，但词表有 {n} 个词',
    'expected [T_max,C] = [T_max,{C}], received {shape}': '应为 [T_max,C] = [T_max,{C}]，实际为{shape}',
    'expected numbers, received an empty list': '应为数，实际为空列表',
    'ragged: row {i} has shape {s} but row 0 has {first}': '参差不齐：第 {i} 行的 shape 是 {s}，但第 0 行是 {first}',
    'expected rows of width C = {C}, received rows of width {C_in}': '应为宽度为 C = {C} 的行，实际为宽度为 {C_in} 的行',
    'expected a [T,T] = [{n},{n}] mask, received {n2} rows': '应为 [T,T] = [{n},{n}] 的掩码，实际为{n2} 行',
    'step {name}: {e}': '步骤 {name}：{e}',
    'expected token ids or words, received an empty list': '应为 token id 或词，实际为空列表',
    'step {name}: weight group {group} is shared by steps that need different weights ({kinds} and {kind})': '步骤 {name}：权重组 {group} 被需要不同权重的步骤共用（{kinds} 和 {kind}）',
    'the final normalisation reads the last step, {inputs}: {e}': '最终归一化读取最后一个步骤 {inputs}：{e}',
    '{what}: expected numbers, received an array of dtype {dtype}': '{what}: 应为数，实际为 dtype 是 {dtype} 的数组',
    "--map {path}: expected THEIRS=OURS (e.g. --map ln1=norm1) or a YAML file of 'theirs: ours' lines; no such file": "--map {path}: expected THEIRS=OURS (e.g. --map ln1=norm1) or a YAML file of 'theirs: ours' lines；文件不存在",
    '{path}: not a readable .npz archive ({e})': '{path}: 不是可读取的 .npz 归档（{e}）',
    '{where}: {theirs}: expected a tracer stage name, received {ours}': '{where}: {theirs}: 应为 tracer 的阶段名，实际为{ours}',
    '--map {item}: expected THEIRS=OURS, e.g. --map ln1=norm1': '--map {item}: 应为 THEIRS=OURS，例如 --map ln1=norm1',
    '{name}: expected a spec: a file path, a dict of spec fields or a loaded Spec, received {name__}': '{name}: 应为 spec：文件路径、由 spec 字段组成的 dict 或已加载的 Spec，实际为{name__}',
    '{name}: {path}: expected a number, text, a list or a mapping, received {name__}': '{name}: {path}: 应为数，文本，a list 或 a mapping，实际为{name__}',
    '{name}: {path}: values nest more than {MAX_DEPTH} levels deep': '{name}: {path}: 数值嵌套超过 {MAX_DEPTH} 层',
    'recorder: {path}: expected a file name such as mine.npz': 'recorder: {path}: 应为文件名，例如 mine.npz',
    'recorder: {path} is a directory; give a file name inside it, e.g. {names}': 'recorder: {path} 是目录；请给出其中的文件名，例如 {names}',
    'recorder: cannot write {path}: the folder {path2} does not exist': 'recorder：无法写入 {path}：文件夹 {path2} 不存在',
    'recorder: {path} exists and is not a regular file; refusing to replace it': 'recorder：{path} 已存在，且不是普通文件；拒绝替换它',
    'recorder: cannot write {path}: {x}; nothing was written': 'recorder: 无法写入 {path}：{x}；没有写入任何内容',
    '{op} reads [B,{x},{letter}] with {letter} = {sizes}, received {axes}': '{op} 读取 [B,{x},{letter}]，其中 {letter} = {sizes}，实际为 {axes}',
    'cannot add {a_axes} and {b_axes}: NumPy cannot broadcast them either': '无法把 {a_axes} 和 {b_axes} 相加：NumPy 也无法广播它们',
    'mha reads all {axes} = {sizes} positions (its mask is [{axes},{axes}]), received {axes2}': 'mha 读取全部 {axes} = {sizes} 个位置（它的掩码是 [{axes},{axes}]），实际为 {axes2}',
    'select along {axis}, but the input is {axes}': '沿 {axis} 做 select，但输入是 {axes}',
    'select {start}:{stop} along {axis}, which has size {shape}': '沿 {axis} 做 select {start}:{stop}，而该轴的大小是 {shape}',
    'cross_mha reads memory [B,S,C], received {m_axes}': 'cross_mha 读取 memory [B,S,C]，实际为 {m_axes}',
    '; did you mean {names}?': '；是不是想写 {names}？',
    'no stage is called {name}{name2} (`tracer stages` lists every name)': '没有叫 {name} 的阶段{name2}（`tracer stages` 列出所有名字）',
    "--stage {name}: no stage of that name in {where}{name2} (`tracer run SPEC --steps` lists a spec's stages, `tracer stages` what each name means)": '--stage {name}：{where} 中没有这个名字的阶段{name2}（`tracer run SPEC --steps` 列出 spec 的阶段，`tracer stages` 说明每个名字的含义）',
    '--precision {precision} is out of range: give 0 to 17': '--precision {precision} 超出范围：请给 0 到 17',
    '--svg and --html export the table the terminal shows; they do not combine with --format {form}': '--svg 和 --html 导出终端显示的表；不能与 --format {form} 同用',
    '--verify-budget {verify_budget} must be at least 1': '--verify-budget {verify_budget} 至少为 1',
    '--attention draws a picture; it does not combine with {x}': '--attention 画的是图；不能与 {x} 同用',
    '{names} {a} and {names2} {b} differ; an elementwise add needs equal shapes': '{names} {a} 与 {names2} {b} 不同；逐元素相加需要相同的 shape',
    '{name} has shape {shape} where [{axis}] = [{width}] is due': '{name} 的 shape 是 {shape}，应为 [{axis}] = [{width}]',
    'LayerNorm statistics taken over {name} ({n} entries) instead of {last} ({shape} coordinates)': 'LayerNorm 的统计量沿 {name}（{n} 项）计算，而不是沿 {last}（{shape} 个坐标）',
    'BatchNorm statistics taken over samples and positions (B x T = {x} x {x2}) for each coordinate': 'BatchNorm 对每个坐标跨样本和位置（B x T = {x} x {x2}）计算统计量',
    'stretch the size-1 axes and return {out} without complaint': '拉伸大小为 1 的轴，一声不响地返回 {out}',
    "repeat {name}'s single value across all {width} coordinates without complaint": '把 {name} 的单个值一声不响地重复到全部 {width} 个坐标',
    '{name} should hold one learned value per coordinate; a stretched value silently ties all {width} together': '{name} 应当为每个坐标保存一个可学习的值；被拉伸的单个值把 {width} 个坐标悄悄绑在一起',
    '{name} holds exactly one value per coordinate: [{axis}] = [{width}]': '{name} 每个坐标恰好一个值：[{axis}] = [{width}]',
    'average over the {n} entries along {name} and normalise without complaint': '沿 {name} 对 {n} 项求平均并归一化，一声不响',
    "one sample's result depends on the other samples and on later positions; sentences differ in length and content, so the same position in different sentences is not comparable (guide, section 5)": '一个样本的结果依赖其他样本和后面的位置；句子的长度和内容各不相同，不同句子的同一位置不可比较（导读第 5 节）',
    '{name}: {axes} = {T} positions but the learned table has T_max = {T_max} rows (indices 0 to {x})': '{name}: {axes} = {T} 个位置，但学习得到的位置表只有 T_max = {T_max} 行（索引 0 到 {x}）',
    'slice P[:{T}] to just {T_max} rows without complaint (and, for a one-row table, broadcast that row to every position)': '一声不响地把 P[:{T}] 切成只有 {T_max} 行（若表只有一行，则把这一行广播到每个位置）',
    'positions {T_max} to {x} were never trained; the table cannot invent them (section 17.1)': '位置 {T_max} 到 {x} 从未训练过；位置表无法凭空造出它们（17.1 节）',
    'cannot add {names} {a} and {names2} {b}: the shapes do not match and NumPy cannot broadcast them': '无法把 {names} {a} 和 {names2} {b} 相加：shape 不匹配，NumPy 也无法广播',
    '{name} has shape {shape}, expected [{axis}] = [{width}]': '{name} 的 shape 是 {shape}，应为 [{axis}] = [{width}]',
    '{option} {value} is out of range: {letter} = {na} in A, {nb} in B (give 0 to {x}, or -1 to -{n} from the end)': '{option} {value} 超出范围：A 中 {letter} = {na}，B 中为 {nb}（请给 0 到 {x}，或从末尾数 -1 到 -{n}）',
    "{path}: no array matches a stage of {label} ({path2}); its arrays: {x}{stats}. Name them as tracer's stages (`tracer run SPEC --steps` lists them) or map them: --map THEIRS=STAGE": '{path}: 没有一个数组与 {label}（{path2}）的阶段对得上；其中的数组：{x}{stats}。请按 tracer 的阶段命名（`tracer run SPEC --steps` 列出它们），或映射它们：--map THEIRS=STAGE',
    '{option}: expected a finite number of 0 or more (such as 1e-9), received {value}': '{option}: 应为 0 或更大的有限数（例如 1e-9），实际为 {value}',
    '{name}: first stage with non-finite values: {n_nan} NaN and {n_inf} Inf, the first at {where}': '{name}: 第一个出现非有限值的阶段：{n_nan} 个 NaN 和 {n_inf} 个 Inf，第一个在 {where}',
    'stage {name} ({formula}): {e}': '阶段 {name}（{formula}）：{e}',
    '--batch {batch} is out of range: B = {B} (samples 0 to {x})': '--batch {batch} 超出范围：B = {B}（样本 0 到 {x}）',
    '--pos {pos} is out of range: T = {T} (positions 0 to {x})': '--pos {pos} 超出范围：T = {T}（位置 0 到 {x}）',
    '--loss {option}: expected one of {names}{option2}': '--loss {option}：应为 {names} 之一{option2}',
    '{path}: JSON nests too deeply to be a tracer trace': '{path}: JSON 嵌套太深，不会是 tracer 的运行记录',
    'expected {what}, received {value}': '应为{what}，实际为{value}',
    '{path}: {not_a_trace}; the document is {doc}': '{path}: {not_a_trace}；文档是{doc}',
    '{path}: is the output of `tracer diff --json`, not a trace; save a trace with `tracer run SPEC --json`': '{path}: 是 `tracer diff --json` 的输出，不是运行记录；请用 `tracer run SPEC --json` 保存运行记录',
    '{path}: {not_a_trace}; it has no {missing} field': '{path}: {not_a_trace}；其中没有 {missing} 字段',
    '{version} is not supported: this tracer reads schema_version {SCHEMA_VERSION}': '{version} 不受支持：此 tracer 读取 schema_version {SCHEMA_VERSION}',
    'expected a positive number such as 1e-5, received {eps}': '应为正数，例如 1e-5，实际为{eps}',
    'expected at least one stage, received an empty list': '应为至少一个阶段，实际为空列表',
    'expected a nested list of numbers, received {values}': '应为数的嵌套列表，实际为{values}',
    "expected shape {shape} as the stage's shape says, received {shape2}": '按阶段的 shape 应为 {shape}，实际为 {shape2}',
    'expected a number, received {obj}': '应为数，实际为{obj}',
    'missing dimension {key}': '缺少维度 {key}',
    'expected a whole number of 1 or more, received {value}': '应为 1 或更大的整数，实际为{value}',
    'missing setting {key}': '缺少设置 {key}',
    'expected a finite number, received {v}': '应为 a finite number，实际为{v}',
    'expected whole numbers of 0 or more, received {n}': '应为 0 或更大的整数，实际为{n}',
    'expected a number or one of "NaN", "Infinity", "-Infinity", received {v}': '应为 a number 或 one of "NaN", "Infinity", "-Infinity"，实际为{v}',
    'cannot multiply [..., {shape}] by a [{shape2}, {shape3}] matrix': '无法用 [{shape2}, {shape3}] 矩阵乘 [..., {shape}]',
    '{path}: this run needs about {breakdown}, over --max-memory {limit_text}{x}. Largest: {parts}. To record less: {names}; or raise --max-memory if this machine has the memory.': '{path}: 这次运行约需 {breakdown}，超过 --max-memory {limit_text}{x}。最大的部分：{parts}。若要少记录：{names}；或者，如果这台机器有足够的内存，就调高 --max-memory。',
    '{option} {text}: expected a size such as 4GB, 512MB, 2GiB or a number of bytes, or none for no limit (KB, MB, GB, TB are powers of 1000; KiB, MiB, GiB, TiB powers of 1024)': '{option} {text}：应为大小，例如 4GB、512MB、2GiB 或字节数，none 表示不设上限（KB、MB、GB、TB 是 1000 的幂；KiB、MiB、GiB、TiB 是 1024 的幂）',
    '{option} {shown}: more than any machine has: at most 1 EiB (none turns the limit off)': '{option} {shown}：超过任何机器的内存：最多 1 EiB（none 表示不设上限）',
    '{option} {text}: the limit must be more than 0 bytes (none turns it off)': '{option} {text}：上限必须大于 0 字节（none 表示关闭）',
    '--record {record}: expected one of {names}': '--record {record}：应为 {names} 之一',
    '--keep {name}: no such stage; {hint}': '--keep {name}：没有这个阶段；{hint}',
    '{option} {path}: the file keeps changing while tracer writes it; nothing was written': '{option} {path}: tracer 写入期间文件一直在变；没有写入任何内容',
    '{opt}: expected a file name such as report.{kind}': '{opt}: 应为文件名，例如 report.{kind}',
    '{opt}: cannot write there: {shown} {what}': '{opt}: 无法写入 there：{shown} {what}',
    '{opt}: cannot write there: the folder {shown} is not writable': '{opt}: 无法写入：文件夹 {shown} 不可写',
    '{opt} would overwrite the input {inp}; choose another file name': '{opt} 会覆盖输入 {inp}；请换一个文件名',
    'cannot write {path}: {x}; nothing was written': '无法写入 {path}：{x}；没有写入任何内容',
    '{option} {path}: {path2} {why}; it appeared or changed during the run, and nothing was written': '{option} {path}: {path2} {why}；它在运行期间出现或被改动，没有写入任何内容',
    '{opt_a} and {opt_b} name the same file {a}: give each its own name': '{opt_a} 和 {opt_b} 指向同一个文件 {a}：请各给一个名字',
    '{path}: the probe cannot measure {names}: {evidence}': '{path}: 探测无法测量{names}：{evidence}',
    '{path}: the model has no attention step (op mha or cross_mha), so there are no attention weights to draw': '{path}: 模型中没有注意力步骤（op mha 或 cross_mha），所以没有注意力权重可画',
    "--attention-stage {name}: no attention step of that name; {path} has: {known} (or 'all')": "--attention-stage {name}：没有这个名字的注意力步骤；{path} 中有：{known}（或 'all'）",
    '{option} {value} is out of range: {axis} = {size} ({what} 0 to {x}, or -1 to -{size} from the end)': '{option} {value} 超出范围：{axis} = {size}（{what} 0 到 {x}，或从末尾数 -1 到 -{size}）',
    '--format {fmt}: expected one of {names}{fmt2}': '--format {fmt}：应为 {names} 之一{fmt2}',
    '--json is short for --format json; it cannot be combined with --format {fmt}': '--json 是 --format json 的简写；不能与 --format {fmt} 同用',
    '{path}: is larger than {x} MiB, the most a spec may be; draw big weights from the seed instead of writing them out': '{path}: 超过 {x} MiB，这是 spec 的上限；大的权重请从 seed 抽取，不要逐个写出',
    '{path}: is a binary file (contains NUL bytes), expected a YAML spec': '{path}: 是二进制文件（含 NUL 字节），这里需要 YAML spec',
    "{path}: is empty, expected a YAML mapping with at least 'dims' and 'input'": "{path}: 是空的，这里需要一个至少含 'dims' 和 'input' 的 YAML 映射",
    'expected a number smaller than about 1.8e308 in magnitude (the largest a float64 holds), received an integer of {n} digits': '应为绝对值小于约 1.8e308 的数（float64 能表示的最大值），实际为 an integer of {n} digits',
    'the tag {tag} is not allowed; tracer reads plain YAML only': '不允许使用标签 {tag}；tracer 只读取普通 YAML',
    '{path}: is a directory, expected a YAML spec file': '{path}: 是一个目录，这里需要 YAML spec 文件',
    '{path}: is not a regular file (a pipe, socket or device), expected a YAML spec file': '{path}: 不是普通文件（是管道、套接字或设备），这里需要 YAML spec 文件',
    '{path}: no such file': '{path}: 文件不存在',
    '{path}: permission denied': '{path}: 没有读取权限',
    '{path}: cannot read: {x}': '{path}: 无法读取：{x}',
    '{filename}: YAML error: {names}': '{filename}: YAML 错误：{names}',
    "{name}: is empty, expected a YAML mapping with at least 'dims' and 'input'": "{name}: 是空的，这里需要一个至少含 'dims' 和 'input' 的 YAML 映射",
    "{m}: a second YAML document ('---'); a spec is one document": "{m}: 出现了第二个 YAML 文档（'---'）；一个 spec 只能是一个文档",
    "{m}: {path}: keys must be plain names (merge keys '<<' are not supported)": "{m}: {path}: 键必须是普通名字（不支持合并键 '<<'）",
    '{m}: {path}: keys must be plain names (not lists, mappings, anchors or aliases)': '{m}: {path}: 键必须是普通名字（不能是列表、映射、锚点或别名）',
    '{start_mark}: {path}: the tag {tag} is not allowed; tracer reads plain YAML only (quote a value to make it text)': '{start_mark}: {path}: 不允许使用标签 {tag}；tracer 只读取普通 YAML（给值加引号即可当作文本）',
    '{start_mark}: {path}: the alias *{anchor} refers to no complete anchor before it (an anchor cannot be used inside its own value)': '{start_mark}: {path}: 别名 *{anchor} 之前没有完整的锚点（锚点不能在它自己的值里使用）',
    'expected a number smaller than about 1.8e308 in magnitude (the largest a float64 holds), received {text}': '应为绝对值小于约 1.8e308 的数（float64 能表示的最大值），实际为{text}',
    '{nq} × {nk} cells per head are too many to print: each cell is the mean weight of a block of {rb} {x} × {cb} {x2} ({n} × {n2} blocks{x3}); shades are relative to the largest mean in each head; a cell is · only when its whole block is masked': '{nq} × {nk} cells per head are too many to print: each cell is the mean weight of a block of {rb} {x} × {cb} {x2} ({n} × {n2} blocks{x3})；深浅相对于每个头中最大的均值；只有整块都被遮挡时格子才是 ·',
    'more than {NUMBER_KEYS} keys: shades only, no numbers (tracer run --all --json has every value)': '键超过 {NUMBER_KEYS} 个：只画深浅，不写数字（tracer run --all --json 有每个值）',
    'Weights: all {n} the same within {tolerance}': '权重：全部 {n} 个在 {tolerance} 内相同',
    'Stages, aligned by name (equal: |A - B| <= atol + rtol * max(|A|, |B|), {tolerance})': '各阶段，按名字对齐（相等：|A - B| <= atol + rtol * max(|A|, |B|)，{tolerance}）',
    'Compared {n} arrays of {label} with the stages of the same name in {reference}: {names}': '把 {label} 的 {n} 个数组与 {reference} 中同名的阶段比较：{names}',
    'named with --map: {renamed}': '由 --map 命名：{renamed}',
    'stage {stage} is NaN in both runs at {blind} of its {total} compared values (stages with such values: {n}): NaN cannot show a change, so the probe cannot tell whether the property holds; probe a spec whose run has no NaN': '阶段 {stage} 在两次运行中都是 NaN（比较的 {total} 个值中有 {blind} 个；有此类值的阶段：{n}）：NaN 显示不出变化，所以探测无法判断性质是否成立；请探测运行中没有 NaN 的 spec',
    'perturbing the positions after t changed no stage at positions 0..t (checked t = {names}; largest change {largest})': '扰动 t 之后的位置，没有任何阶段在位置 0..t 处改变（检查了 t = {names}；最大变化 {largest}）',
    'with positions and mask removed, moving row {x} of X to the front did not move stage {name} the same way (largest difference {diff})': '去掉位置和掩码后，把 X 的第 {x} 行移到最前面，阶段 {name} 没有做同样的移动（最大差 {diff}）',
    'weights from a checkpoint': '来自检查点的权重',
    'fields of a weight read from a file': '从文件读取的权重的字段',
    'targets are the tokens next-token predicts: they need an output head (block.head)': 'targets 是 next-token 要预测的 token：它们需要输出层（block.head）',
    'token id {top} is out of range: the vocabulary has V = {V} ids (0 to {x})': 'token id {top} 超出范围：词表有 V = {V} 个 id（0 到 {x}）',
    'token id {max_token} is out of range: with no embedding table and no dims.V, V is the largest token id + 1, at most {MAX_DIM} (ids 0 to {x})': 'token id {max_token} 超出范围：没有嵌入表也没有 dims.V 时，V 是最大的 token id + 1，最多 {MAX_DIM}（id 为 0 到 {x}）',
    'a weight given as a mapping reads a file: {file: w.npz, key: attn_q}': '以映射给出的权重从文件读取：{file: w.npz, key: attn_q}',
    'next-token scores the vocabulary: it needs an output head ({where}.head: tied or separate)': 'next-token 给词表打分：它需要输出层（{where}.head: tied 或 separate）',
    'the table in the checkpoint has {rows_in_file} rows but {source}': '检查点中的表有 {rows_in_file} 行，但{source}',
    'which layout? add layout: {names} (the checkpoint has no config.json whose model_type names one)': '哪种布局？请加上 layout: {names}（检查点没有 config.json 可以由其 model_type 指明布局）',
    '{what} {key} is given but nothing in the model reads it': '给出了{what} {key}，但模型中没有任何步骤读取它',
    '{path}: {x}, expected an .npz archive of arrays': '{path}: {x}，这里需要由数组组成的 .npz 归档',
    '{path}: is not an .npz archive (an .npz is a zip file of .npy arrays, as np.savez writes it)': '{path}: 不是 .npz 归档（.npz 是由 .npy 数组组成的 zip 文件，np.savez 就这样写）',
    "{path}: holds one bare array (.npy), not an archive of named arrays; write one with np.savez('mine.npz', norm1=...)": "{path}: 只有一个单独的数组（.npy），不是由具名数组组成的归档；请用 np.savez('mine.npz', norm1=...) 写一个",
    '{path}: the archive holds no arrays': '{path}: 归档中没有数组',
    '{what}: not an array of numbers ({e})': '{what}: 不是数的数组（{e}）',
    '--map {theirs}={ours}: {path} has no array {theirs2}{theirs3} (its arrays: {x})': '--map {theirs}={ours}：{path} 中没有数组 {theirs2}{theirs3}（其中的数组：{x}）',
    '--map {theirs}={ours}: {ref_label} has no stage {ours2}{ours3}': '--map {theirs}={ours}：{ref_label} 中没有阶段 {ours2}{ours3}',
    '--map: {by_ours} and {theirs} are both mapped to the stage {ours}': '--map：{by_ours} 和 {theirs} 都映射到了阶段 {ours}',
    '{where}: {theirs} is already mapped to {out}': '{where}: {theirs} 已经映射到 {out}',
    '{path}: array {name} holds Python objects; tracer reads arrays of numbers only (and never unpickles)': '{path}: 数组 {name} 保存的是 Python 对象；tracer 只读取数的数组（也从不反序列化 pickle）',
    '{path}: array {name} cannot be read ({e})': '{path}: 无法读取数组 {name}（{e}）',
    'side {label}: expected a path, a Spec, a spec dict, a Trace or a mapping of stage name -> array, received {name__}': 'side {label}：应为路径、Spec、spec 字典、Trace 或阶段名 -> 数组的映射，实际为 {name__}',
    '{name}: {path}: keys must be text, received {key}': '{name}: {path}: 键必须是文本，实际为 {key}',
    'recorder: {name} is not an array of numbers (dtype {dtype})': 'recorder：{name} 不是数的数组（dtype {dtype}）',
    "recorder: a stage name is text such as 'norm1', received {name}": "recorder：阶段名是文本，例如 'norm1'，实际为 {name}",
    'recorder: {name} is recorded twice; give each stage its own name (in a stack of layers: blocks.0.norm1, blocks.1.norm1, ...)': 'recorder：{name} 被记录了两次；请给每个阶段各起一个名字（在堆叠的层中：blocks.0.norm1、blocks.1.norm1……）',
    "recorder: nothing was recorded, so {path} was not written; call rec('norm1', array) inside the block": "recorder：什么也没有记录，所以没有写入 {path}；请在块内调用 rec('norm1', array)",
    'recorder: {path} exists and is not an .npz archive; refusing to overwrite it (delete it or choose another name)': 'recorder：{path} 已存在，且不是 .npz 归档；拒绝覆盖它（请删除它或换一个名字）',
    'batch {batch} is out of range: B = {B} (samples 0 to {x})': 'batch {batch} 超出范围：B = {B}（样本 0 到 {x}）',
    'pos {pos} is out of range: T = {T} (positions 0 to {x})': 'pos {pos} 超出范围：T = {T}（位置 0 到 {x}）',
    'precision {precision} is out of range: give 0 to 17': 'precision {precision} 超出范围：请给 0 到 17',
    'no axis {letter} in {x}': '{x} 中没有轴 {letter}',
    'shapes {x} cannot be broadcast': 'shape {x} 无法广播',
    '--map names the arrays of a file another program wrote (.npz or a JSON object of arrays); neither side is one': '--map 用来命名另一个程序写出的文件（.npz 或由数组组成的 JSON 对象）中的数组；两侧都不是这种文件',
    '{option} {value} is out of range: {letter} = {n} in {label} (give 0 to {x})': '{option} {value} 超出范围：{label} 中 {letter} = {n}（请给 0 到 {x}）',
    "--per-layer draws a table and bars; with --format {form} use --json's weight_grads instead": '--per-layer 画的是表格和条形；用 --format {form} 时请改用 --json 的 weight_grads',
    '{path}: next-token needs T >= 2 (position t predicts token t+1), received T = {shape}; give input.targets or use --loss sum-squares': '{path}: next-token 需要 T >= 2（位置 t 预测 token t+1），实际 T = {shape}；请给出 input.targets，或使用 --loss sum-squares',
    '--loss next-token scores the vocabulary: the spec needs an output head (block.head: tied or separate)': '--loss next-token 给词表打分：spec 需要输出层（block.head: tied 或 separate）',
    '{path}: tracer grad keeps every stage and the gradient of each stage and weight: about {breakdown}, over --max-memory {max_memory}. Largest: {parts}. Lower B, T or the number of layers, or raise --max-memory if this machine has the memory.': '{path}: tracer grad 要保留每个阶段以及每个阶段和权重的梯度：约 {breakdown}，超过 --max-memory {max_memory}。最大的部分：{parts}。请减小 B、T 或层数；如果这台机器有足够内存，也可以调高 --max-memory。',
    '--weight {weight}: no layer has it{x}': '--weight {weight}：没有哪一层有它{x}',
    '{path}: --per-layer compares the layers of a stack, and this spec has none (block.layers > 1)': '{path}: --per-layer 比较的是堆叠中的各层，而这个 spec 没有堆叠（block.layers > 1）',
    '{path}:{lineno}:{colno}: not valid JSON: {msg}': '{path}:{lineno}:{colno}: 不是合法的 JSON：{msg}',
    'appears twice; stage names are unique in a trace': '出现了两次；运行记录中的阶段名是唯一的',
    'missing values': '缺少 values',
    'the stage was kept as statistics (tracer run --record stats); comparing needs every value: save the trace with --record all': '该阶段只保存了统计量（tracer run --record stats）；比较需要每个值：请用 --record all 保存运行记录',
    'ragged: the rows of this nested list have different lengths': '参差不齐：这个嵌套列表的各行长度不同',
    'holds a whole number too large for a double': '含有一个 double 放不下的大整数',
    'H_kv = {H_kv} key/value heads cannot be shared evenly by H = {H} query heads': 'H_kv = {H_kv} 个键/值头无法由 H = {H} 个查询头平均共用',
    '{what} needs about {total} ({detail}, interpreter {INTERPRETER_BYTES}), over --max-memory {limit_text}; {advice}, or raise --max-memory if this machine has the memory': '{what}约需 {total}（{detail}，解释器 {INTERPRETER_BYTES}），超过 --max-memory {limit_text}；{advice}，如果这台机器有足够内存，也可以调高 --max-memory',
    '{opt}: {path} {why}': '{opt}：{path} {why}',
    'standard output was closed by its reader': '标准输出被它的读取方关闭了',
    'NumPy and the scalar reference differ by {stages} at stage {name}, above the tolerance {name2}{more}': 'NumPy 与标量参考实现在阶段 {name} 相差 {stages}，超过容差 {name2}{more}',
    '--verify: every stage agrees with tracer/reference.py to within {rtol} x max(1, largest |value|)': '--verify：每个阶段与 tracer/reference.py 的差都在 {rtol} x max(1, 最大 |值|) 以内',
    "one of the two computations is wrong for this input: the trace's numbers cannot be trusted": '两种计算中有一种对这个输入算错了：运行记录中的数不可信',
    'empty': '空的',
    'an object': '一个对象',
    'an object {path, name}': '对象 {path, name}',
    'an object of dimensions {B, T, C, H, F, ...}': '由维度组成的对象 {B, T, C, H, F, ...}',
    'an object {norm_order, mask, eps, ...}': '对象 {norm_order, mask, eps, ...}',
    'a list of steps': '步骤列表',
    'a list of stages': '阶段列表',
    'a list of violations': '违规列表',
    'an object {weight name: nested list}': '对象 {weight name: nested list}',
    'an object {name, op, inputs, weights}': '对象 {name, op, inputs, weights}',
    'a list of stage names': '阶段名列表',
    'an object {name, meaning, shape, axes, values}': '对象 {name, meaning, shape, axes, values}',
    'a list of whole numbers': '整数列表',
    'a list of axis letters': '轴字母列表',
    'an object {kind, stage, message}': '对象 {kind, stage, message}',
    'a weight group name or null': '权重组名或 null',
    '{f} cannot be examined: {why}': '无法检查 {f}：{why}',
    '; kept as statistics only (--record stats): {names}': '；只保存了统计量（--record stats）：{names}',
    '{ok} ok, {v}, {e}': '{ok} 个通过，{v}，{e}',
    'entries along {letter}': '沿 {letter} 的各项',
})
PLURALS.update({
    ('{n} level of nesting', '{n} levels of nesting'): '{n} 层嵌套',
    ('{op} reads {n} stage, received {m}', '{op} reads {n} stages, received {m}'): '{op} 读取 {n} 个阶段，实际给了 {m} 个',
    ('expected a list of {n} layer mapping (one per layer), received {got}', 'expected a list of {n} layer mappings (one per layer), received {got}'): '应为{n} 个层映射组成的列表（每层一个），实际为{got}',
    ('{name} holds {n} sample (b = 0 to {x}): there is no sample b={b} to show', '{name} holds {n} samples (b = 0 to {x}): there is no sample b={b} to show'): '{name} 只有 {n} 个样本（b = 0 到 {x}）：没有样本 b={b} 可显示',
    ("each sample's result now depends on the other {n} sample of the batch: statistics mix samples", "each sample's result now depends on the other {n} samples of the batch: statistics mix samples"): '每个样本的结果现在依赖这批中另外 {n} 个样本：统计量混合了样本',
    ('query position {rows} may read no key at all: the softmax of a row that is entirely -inf is 0/0 = NaN', 'query positions {rows} may read no key at all: the softmax of a row that is entirely -inf is 0/0 = NaN'): '查询位置 {rows} 一个键也不能读：整行都是 -inf 的 softmax 是 0/0 = NaN',
    ('{n} with a violation', '{n} with violations'): '{n} 个有违规',
    ('{n} error', '{n} errors'): '{n} 个出错',
    ('{n} spec: {parts}; exit code {code}', '{n} specs: {parts}; exit code {code}'): '{n} 个 spec：{parts}；退出码 {code}',
    ('{n} other equal within {tol}', '{n} others equal within {tol}'): '另有 {n} 个在 {tol} 内相等',
})
# <<< messages made with msg()

# >>> meanings (new keys)
MESSAGES.update({
    "normalisation": "归一化",
    "RMS normalisation": "RMS 归一化",
    "batch normalisation (over B and T)": "批归一化（统计量跨 B 和 T）",
    "the activation": "激活",
    "X (rotary positions act inside attention)": "X（旋转位置编码在注意力内部起作用）",
    "X (no positions)": "X（没有位置信息）",
    "first {norm}, N_1 = {LN}1(X)": "第一次{norm}，N_1",
    "attention output, U = MHA(N_1)": "注意力输出，U",
    "first residual add, R = X + U": "第一次残差相加，R",
    "second {norm}, N_2 = {LN}2(R)": "第二次{norm}，N_2",
    "FFN after {act}, {actf}(N_2 W_1 + b_1)": "FFN 的{act}之后",
    "FFN output, hidden W_2 + b_2": "FFN 输出",
    "block output, Y = R + FFN(N_2)": "块的最终输出，Y",
    "attention output, U = MHA(X)": "注意力输出，U = MHA(X)",
    "first residual add, X + U": "第一次残差相加，X + U",
    "first {norm}, R_post = {LN}1(X + U)": "第一次{norm}，R_post = {LN}1(X + U)",
    "FFN after {act}, {actf}(R_post W_1 + b_1)": "FFN 的{act}之后，{actf}(R_post W_1 + b_1)",
    "second residual add, R_post + FFN(R_post)": "第二次残差相加，R_post + FFN(R_post)",
    "second {norm}, {LN}2(R_post + FFN)": "第二次{norm}，{LN}2(R_post + FFN)",
    "block output, Y_post": "块的最终输出，Y_post",
    "first {norm}, {LN}1(X)": "第一次{norm}，{LN}1(X)",
    "first {norm}, {LN}1(X + U)": "第一次{norm}，{LN}1(X + U)",
    "masked self-attention": "带掩码的自注意力",
    "first residual add": "第一次残差相加",
    "second {norm}": "第二次{norm}",
    "cross-attention: decoder queries, encoder keys and values": "交叉注意力：查询来自解码器，键和值来自编码器",
    "second residual add": "第二次残差相加",
    "third {norm}": "第三次{norm}",
    "FFN after {act}": "FFN 的{act}之后",
    "FFN output": "FFN 输出",
    "third residual add": "第三次残差相加",
    "decoder layer output": "解码器层的输出",
    "final normalisation after the stack": "堆叠之后的最终归一化",
    "logits over the vocabulary": "词表上的 logits",
    "next-token probabilities, softmax over V": "下一个 token 的概率，沿 V 做 softmax",
    "queries, split into heads": "查询（Q），拆成多个头",
    "keys, split into heads": "键（K），拆成多个头",
    "values, split into heads": "值（V），拆成多个头",
    "scores QK^T / sqrt(d), before the mask": "分数 QK^T / sqrt(d)，掩码之前",
    "attention weights, softmax over keys after the mask": "注意力权重，掩码之后沿键做 softmax",
    "heads mixed and concatenated, before W_O": "各头混合后拼接，乘 W_O 之前",
    "sinusoidal positions, base {base}": "正余弦位置编码，底数 {base}",
    "{meaning}, turned by rotary positions": "{meaning}，经旋转位置编码转动",
    "{meaning} (pre-norm decoder layer)": "{meaning}（Pre-Norm 解码器层）",
    "{meaning} (post-norm decoder layer)": "{meaning}（Post-Norm 解码器层）",
    "{meaning} (the decoder output)": "{meaning}（解码器的输出）",
    "{meaning} (the encoder output: the memory cross-attention reads)": "{meaning}（编码器的输出：交叉注意力读取的 memory）",
    "{meaning} (block.{field}: {value})": "{meaning}（block.{field}: {value}）",
    "{meaning} (grouped-query attention, dims.H_kv < H)": "{meaning}（分组查询注意力，dims.H_kv < H）",
})
MESSAGES.update({
    "the encoder output": "编码器的输出",
    "the decoder output": "解码器的输出",
    "{b} W_K + b_K, split into heads": "{b} W_K + b_K，拆成多个头",
    "{b} W_V + b_V, split into heads": "{b} W_V + b_V，拆成多个头",
    "PE[t, 2i] = sin(t / base^(2i/C)), PE[t, 2i+1] = cos(t / base^(2i/C))": "PE[t, 2i] = sin(t / base^(2i/C)), PE[t, 2i+1] = cos(t / base^(2i/C))",
    "act({a} W_1 + b_1) W_2 + b_2": "act({a} W_1 + b_1) W_2 + b_2",
    "act({a} W_1 + b_1)": "act({a} W_1 + b_1)",
    "{a} W_2 + b_2": "{a} W_2 + b_2",
    "{a} W + b": "{a} W + b",
    "max({a}, 0)": "max({a}, 0)",
    "{a}": "{a}",
    "ReLU({a} W_1 + b_1) = max({a} W_1 + b_1, 0)": "ReLU({a} W_1 + b_1) = max({a} W_1 + b_1, 0)",
    "GELU({a} W_1 + b_1), GELU(z) = z Phi(z) = z/2 (1 + erf(z / sqrt 2))": "GELU({a} W_1 + b_1), GELU(z) = z Phi(z) = z/2 (1 + erf(z / sqrt 2))",
    "silu({a} W_1 + b_1) * ({a} W_3 + b_3), silu(z) = z sigmoid(z)": "silu({a} W_1 + b_1) * ({a} W_3 + b_3), silu(z) = z sigmoid(z)",
})
PLURALS.update({
    ("{name} holds {n} sample (b = 0 to {last}): there is no sample b={b} to show", "{name} holds {n} samples (b = 0 to {last}): there is no sample b={b} to show"): "{name} 只有 {n} 个样本（b = 0 到 {last}）：没有样本 b={b} 可显示",
})
MESSAGES.update({
    "--preset {name}: no such preset{hint}": "--preset {name}：没有这个预设{hint}",
    "interrupted": "已中断",
    "terminated": "已终止",
    "internal error: {what}": "内部错误：{what}",
    "this is a bug in tracer; please report it with the spec and the command you ran (set TRACER_DEBUG=1 to see the traceback)":
        "这是 tracer 的缺陷；请报告它，并附上 spec 和所运行的命令（设置 TRACER_DEBUG=1 可看到调用栈）",
})
MESSAGES.update({
    "{label} (statistics and one slice)": "{label}（统计量和一个切片）",
    "{label} (one slice)": "{label}（一个切片）",
    "{label} (recorded)": "{label}（完整记录）",
    "weights and inputs": "权重和输入",
    "working memory of {what}": "{what}的工作内存",
    "--json output": "--json 输出",
    "--format csv output": "--format csv 输出",
    "--with-weights": "--with-weights",
    "--verify reference": "--verify 参考实现",
    "backward gradients": "反向传播的梯度",
    "--json gradients": "--json 梯度",
    "{label} {size}": "{label} {size}",
    "scores and weights": "分数和权重",
    "its temporaries": "它的临时数组",
    "step {name} ({held})": "步骤 {name}（{held}）",
    "reading this spec": "读取这个 spec",
    "its values (about {n})": "其中的值（约 {n} 个）",
    "none: the table keeps only each stage's value at one position and the block output, and {what} alone holds {size}":
        "都不行：表格只保留每个阶段在一个位置的值和块的输出，而{what}单独就占 {size}",
    "this probe": "这次探测",
    "the unchanged run": "未改动的运行",
    "the changed run": "改动后的运行",
    "{a} and {b}: this diff": "{a} 和 {b}：这次比较",
    "side A": "A 侧",
    "side B": "B 侧",
    "comparing": "比较",
})
MESSAGES.update({
    "an encoder layer: the pre-norm or post-norm layer's stages over the S source positions, attention unmasked":
        "编码器层：Pre-Norm 或 Post-Norm 层的各阶段，作用于 S 个源位置，注意力不加掩码",
    "select needs its axis, start and stop": "select 需要它的 axis、start 和 stop",
})
MESSAGES.update({
    "equal": "相等",
    "differs": "不同",
    "shapes differ": "shape 不同",
    "only in A": "仅 A 有",
    "only in B": "仅 B 有",
    "not recorded": "未记录",
    "{label}: {path} (arrays, {name})": "{label}：{path}（数组，{name}）",
    "--grad runs the backward pass, which needs the spec: give a YAML spec, not saved arrays or a saved trace":
        "--grad 要做反向传播，需要 spec：请给出 YAML spec，而不是保存的数组或运行记录",
    "{label} ({path}): {kind} violation: {message}": "{label}（{path}）：{kind}违规：{message}",
    "--grad: each stage's and weight's gradient of the side's loss (tracer grad), in backward order":
        "--grad：每个阶段和每个权重关于该侧损失的梯度（tracer grad），按反向传播的顺序",
    "first diverging stage: {name} ({status}, largest |A - B| = {d} at {where}; at b={b}, t={t} the two agree)":
        "第一个出现分歧的阶段：{name}（{status}，最大 |A - B| = {d}，位于 {where}；在 b={b}, t={t} 处两者一致）",
})
PLURALS.update({
    ("{n} array", "{n} arrays"): "{n} 个",
    ("{n} stage not recorded", "{n} stages not recorded"): "{n} 个阶段未记录",
})
MESSAGES.update({
    "first residual path": "第一条残差路径",
    "second residual path": "第二条残差路径",
    "third residual path": "第三条残差路径",
    "fourth residual path": "第四条残差路径",
    "fifth residual path": "第五条残差路径",
    "sixth residual path": "第六条残差路径",
    "seventh residual path": "第七条残差路径",
    "eighth residual path": "第八条残差路径",
    "ninth residual path": "第九条残差路径",
    "tenth residual path": "第十条残差路径",
    "residual path {n}:": "第 {n} 条残差路径：",
    "{layer}: {path}: {rest}": "{layer}：{path}：{rest}",
    "{path}: {rest}": "{path}：{rest}",
    "encoder-decoder": "编码器—解码器",
    "pre-norm": "Pre-Norm",
    "post-norm": "Post-Norm",
    "before the block": "进入块之前",
    ", rotary base {base}": "，旋转位置编码底数 {base}",
    ", rotary base {base}, pairs (i, i + d/2)": "，旋转位置编码底数 {base}，坐标对 (i, i + d/2)",
    "{mask} mask": "{mask} 掩码",
    ", softmax over queries": "，沿查询做 softmax",
    "{stream} tokens": "{stream} token",
    "tokens": "token",
    # an op's graph template (its record's graph), filled by tracer graph
    "rows of E for the {tokens}": "{tokens}对应的 E 的行",
    "sin / cos of the position, base {base}": "位置的 sin / cos，底数 {base}",
    "{a} + {b}": "{a} + {b}",
    "{x} {head}": "{x} {head}",
    "mha({ins}), {mask}{rotary}{over}": "mha({ins})，{mask}{rotary}{over}",
    "cross_mha({ins}), {mask}{rotary}{over}": "cross_mha({ins})，{mask}{rotary}{over}",
    "{hidden} W_2 + b_2": "{hidden} W_2 + b_2",
    "{hidden}": "{hidden}",
    "{x} W_2 + b_2": "{x} W_2 + b_2",
    "ReLU({x})": "ReLU({x})",
    "{x}, {axis} {start}:{stop} (the axis kept)": "{x}，{axis} {start}:{stop}（保留该轴）",
    "{x}": "{x}",
})
PLURALS.update({("{order}, {n} layer", "{order}, {n} layers"): "{order}，{n} 层"})
MESSAGES.update({
    "{axes} = {T} positions but the learned table has T_max = {T_max} rows (indices 0 to {x})": "{axes} = {T} 个位置，但学习得到的位置表只有 T_max = {T_max} 行（索引 0 到 {x}）",
    "first stage with non-finite values: {n_nan} NaN and {n_inf} Inf, the first at {where}": "第一个出现非有限值的阶段：{n_nan} 个 NaN 和 {n_inf} 个 Inf，第一个在 {where}",
})
MESSAGES.update({
    "-mean over b, t of log probs[b, t, next token]": "-沿 b、t 求 log probs[b, t, 下一个 token] 的均值",
    "0.5 * sum of {stage}^2": "0.5 * {stage}^2 之和",
    "{nq} × {nk} cells per head are too many to print: each cell is the mean weight of a block of {rb} {q} × {cb} {k} ({r} × {c} blocks)":
        "每个头 {nq} × {nk} 个格子，太多，无法逐个打印：每格是一块 {rb} 个{q} × {cb} 个{k}的平均权重（{r} × {c} 块）",
    "{nq} × {nk} cells per head are too many to print: each cell is the mean weight of a block of {rb} {q} × {cb} {k} ({r} × {c} blocks, the last ones smaller)":
        "每个头 {nq} × {nk} 个格子，太多，无法逐个打印：每格是一块 {rb} 个{q} × {cb} 个{k}的平均权重（{r} × {c} 块，最后几块较小）",
})
MESSAGES.update({
    "--lang {option}: expected one of zh | en (zh: the book's Chinese, en: English){hint}": "--lang {option}：应为 zh | en 之一（zh：书中的中文，en：英文）{hint}",
    "is a directory": "是一个目录",
    '{text} (not a finite number; only a stage\'s values may hold "NaN", "Infinity" or "-Infinity", as strings)':
        '{text}（不是有限数；只有阶段的 values 可以含有字符串 "NaN"、"Infinity" 或 "-Infinity"）',
    "expected {n} axis letters (one per entry of shape {shape}), received {axes}": "应为 {n} 个轴字母（shape {shape} 的每一项一个），实际为 {axes}",
    "no gradient: the forward pass stopped at the violation (--keep-going takes the gradient of what NumPy computed)":
        "没有梯度：前向计算在违规处停止（--keep-going 会对 NumPy 算出的结果求梯度）",
    "--verify: {n} coordinates of {w} weights by central differences (h = {h} * max(1, |w|)), tolerance {rtol} * (|numeric| + |backward|) + {atol} * max(1, |loss|): {result}":
        "--verify：用中心差分检查了 {w} 个权重的 {n} 个坐标（h = {h} * max(1, |w|)），容差 {rtol} * (|numeric| + |backward|) + {atol} * max(1, |loss|)：{result}",
    "nothing to check": "没有可检查的",
    "all agree; the largest difference {d} ({where})": "全部一致；最大差 {d}（{where}）",
    "{n} disagree, the first {where}: backward {backward}, numeric {numeric}": "{n} 个不一致，第一个是 {where}：反向传播 {backward}，数值 {numeric}",
    "; the layers have {names}": "；各层有 {names}",
    "all {n} coordinates": "全部 {n} 个坐标",
    "{k} of the {n} coordinates (sampled: over {passes} backward passes would be needed for all; a proof for these only)":
        "{n} 个坐标中的 {k} 个（抽样：全部检查需要超过 {passes} 次反向传播；只对这些坐标给出证明）",
    "the gradient of {out} at every position t < {T}, sample and {scope}, with respect to {x} at every later position is exactly 0.0 ({n} backward passes): for these weights no position reads a later one":
        "{out} 在每个位置 t < {T}、每个样本和{scope}上，对 {x} 在每个更后位置的梯度都恰好是 0.0（{n} 次反向传播）：对这些权重，没有哪个位置读取后面的位置",
    "the output {shape} has no [B,T,...] positions to check": "输出 {shape} 没有可检查的 [B,T,...] 位置",
    "T = 1: there is no later position to depend on": "T = 1：没有可以依赖的后面的位置",
    "{grad} is not zero: position {t} depends on position {s}, although the mask is causal; the dependence enters at stage {where}":
        "{grad} 不为零：位置 {t} 依赖位置 {s}，尽管掩码是因果的；这一依赖从阶段 {where} 进入",
    "; its stages: {names}": "；它的阶段：{names}",
    "no stage {name} in this trace{hint}": "这次运行记录中没有阶段 {name}{hint}",
    "no stage {name} in this trace (the run stopped at a {kind} violation at {stage}){hint}": "这次运行记录中没有阶段 {name}（运行在 {stage} 处的{kind}违规停止）{hint}",
    "{name} was kept as statistics (record='stats'), not in full; trace again with keep=[{quoted}] or record='all'":
        "{name} 只保存了统计量（record='stats'），不是完整的值；请用 keep=[{quoted}] 或 record='all' 重新运行",
    "loading the weights": "加载权重",
    "reading the checkpoint": "读取检查点",
})
MESSAGES.update({
    "wrote {path} (preset {preset}); trace it with: tracer run {path}": "已写入 {path}（预设 {preset}）；用 tracer run {path} 运行它",
    "wrote {path} ({summary}); trace it with: tracer run {path}": "已写入 {path}（{summary}）；用 tracer run {path} 运行它",
})
