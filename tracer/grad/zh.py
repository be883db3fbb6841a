"""The Chinese of what tracer/grad/ says, keyed by its English: the catalogue of this package's messages
(MESSAGES), plural forms (PLURALS) and UI words (UI), kept as tracer/zh.py keeps the whole (its docstring says how).
Nothing here imports anything."""

UI: dict[str, str] = {
    '{name}: the training signal (gradients), stage by stage': '{name}：训练信号（梯度），逐阶段',
    'gradient at b={b}, t={t}{word}': 'b={b}, t={t}{word} 处的梯度',
    '|gradient|': '|梯度|',
    '|gradient| / |value|': '|梯度| / |值|',
    'loss {name} = {value}: {formula}; gradients in backward order, from the loss to the input': '损失 {name} = {value}：{formula}；梯度按反向传播的顺序列出，从损失到输入',
    'weight gradients, grouped by layer': '权重的梯度，按层分组',
    '{name}: |dL/d {weight}| of each layer': '{name}：每一层的 |dL/d {weight}|',
    'loss {name}; last / first layer = {ratio}': '损失 {name}；最后一层 / 第一层 = {ratio}',
    '/ layer 0': '/ 第 0 层',
}

MESSAGES: dict[str, str] = {
    'no gradient: the forward pass stopped at the violation (--keep-going takes the gradient of what NumPy computed)': '没有梯度：前向计算在违规处停止（--keep-going 会对 NumPy 算出的结果求梯度）',
    "--per-layer draws a table and bars; with --format {form} use --json's weight_grads instead": '--per-layer 画的是表格和条形；用 --format {form} 时请改用 --json 的 weight_grads',
    '--verify: {n} coordinates of {w} weights by central differences (h = {h} * max(1, |w|)), tolerance {rtol} * (|numeric| + |backward|) + {atol} * max(1, |loss|): {result}': '--verify：用中心差分检查了 {w} 个权重的 {n} 个坐标（h = {h} * max(1, |w|)），容差 {rtol} * (|numeric| + |backward|) + {atol} * max(1, |loss|)：{result}',
    'nothing to check': '没有可检查的',
    'all agree; the largest difference {d} ({where})': '全部一致；最大差 {d}（{where}）',
    '{n} disagree, the first {where}: backward {backward}, numeric {numeric}': '{n} 个不一致，第一个是 {where}：反向传播 {backward}，数值 {numeric}',
    '-mean over b, t of log probs[b, t, next token]': '-沿 b、t 求 log probs[b, t, 下一个 token] 的均值',
    '0.5 * sum of {stage}^2': '0.5 * {stage}^2 之和',
    '{path}: next-token needs T >= 2 (position t predicts token t+1), received T = {shape}; give input.targets or use --loss sum-squares': '{path}: next-token 需要 T >= 2（位置 t 预测 token t+1），实际 T = {shape}；请给出 input.targets，或使用 --loss sum-squares',
    '--loss {option}: expected one of {names}{option2}': '--loss {option}：应为 {names} 之一{option2}',
    '--loss next-token scores the vocabulary: the spec needs an output head (block.head: tied or separate)': '--loss next-token 给词表打分：spec 需要输出层（block.head: tied 或 separate）',
    '{path}: tracer grad keeps every stage and the gradient of each stage and weight: about {breakdown}, over --max-memory {max_memory}. Largest: {parts}. Lower B, T or the number of layers, or raise --max-memory if this machine has the memory.': '{path}: tracer grad 要保留每个阶段以及每个阶段和权重的梯度：约 {breakdown}，超过 --max-memory {max_memory}。最大的部分：{parts}。请减小 B、T 或层数；如果这台机器有足够内存，也可以调高 --max-memory。',
    '--weight {weight}: no layer has it{x}': '--weight {weight}：没有哪一层有它{x}',
    '{path}: --per-layer compares the layers of a stack, and this spec has none (block.layers > 1)': '{path}: --per-layer 比较的是堆叠中的各层，而这个 spec 没有堆叠（block.layers > 1）',
    '; the layers have {names}': '；各层有 {names}',
}
