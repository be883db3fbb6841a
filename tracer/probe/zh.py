"""The Chinese of what tracer/probe/ says, keyed by its English: the catalogue of this package's messages
(MESSAGES), plural forms (PLURALS) and UI words (UI), kept as tracer/zh.py keeps the whole (its docstring says how).
Nothing here imports anything."""

UI: dict[str, str] = {
    '{name}: properties': '{name}：性质检查',
    'property': '性质',
    'result': '结果',
    'evidence': '证据',
}

MESSAGES: dict[str, str] = {
    'all {n} coordinates': '全部 {n} 个坐标',
    '{k} of the {n} coordinates (sampled: over {passes} backward passes would be needed for all; a proof for these only)': '{n} 个坐标中的 {k} 个（抽样：全部检查需要超过 {passes} 次反向传播；只对这些坐标给出证明）',
    'the gradient of {out} at every position t < {T}, sample and {scope}, with respect to {x} at every later position is exactly 0.0 ({n} backward passes): for these weights no position reads a later one': '{out} 在每个位置 t < {T}、每个样本和{scope}上，对 {x} 在每个更后位置的梯度都恰好是 0.0（{n} 次反向传播）：对这些权重，没有哪个位置读取后面的位置',
    "the block's mask is {mask}, not causal: later positions may be read by design": '块的掩码是 {mask}，不是 causal：按设计可以读取后面的位置',
    'the output {shape} has no [B,T,...] positions to check': '输出 {shape} 没有可检查的 [B,T,...] 位置',
    'T = 1: there is no later position to depend on': 'T = 1：没有可以依赖的后面的位置',
    '{grad} is not zero: position {t} depends on position {s}, although the mask is causal; the dependence enters at stage {where}': '{grad} 不为零：位置 {t} 依赖位置 {s}，尽管掩码是因果的；这一依赖从阶段 {where} 进入',
    'stage {stage} is NaN in both runs at {blind} of its {total} compared values (stages with such values: {n}): NaN cannot show a change, so the probe cannot tell whether the property holds; probe a spec whose run has no NaN': '阶段 {stage} 在两次运行中都是 NaN（比较的 {total} 个值中有 {blind} 个；有此类值的阶段：{n}）：NaN 显示不出变化，所以探测无法判断性质是否成立；请探测运行中没有 NaN 的 spec',
    'position {a}': '位置 {a}',
    'positions {a}..{b}': '位置 {a}..{b}',
    'perturbing the positions after t changed no stage at positions 0..t (checked t = {names}; largest change {largest})': '扰动 t 之后的位置，没有任何阶段在位置 0..t 处改变（检查了 t = {names}；最大变化 {largest}）',
    "moving row {r} of X to the front moved every per-position stage's rows the same way (largest difference {d}).": '把 X 的第 {r} 行移到最前面，每个逐位置阶段的行都做了同样的移动（最大差 {d}）。',
    'T = 1: there is no later position to perturb': 'T = 1：没有后面的位置可以扰动',
    'T = 1: there is nothing to permute': 'T = 1：没有可以重排的东西',
    "an encoder-decoder has two inputs; Example 17.1's property is about one block's rows": '编码器—解码器有两份输入；例 17.1 的性质说的是一个块的各行',
    "moving row {r} of X to the front moved every per-position stage's rows the same way (largest difference {d}). Checked with positions and mask removed, as Example 17.1 states it; the spec's own positions and mask are what break it on purpose.": '把 X 的第 {r} 行移到最前面，每个逐位置阶段的行都做了同样的移动（最大差 {d}）。按例 17.1 的说法，检查时去掉了位置和掩码；spec 自己的位置和掩码正是有意打破这一性质的东西。',
    '{path}: the probe cannot measure {names}: {evidence}': '{path}: 探测无法测量{names}：{evidence}',
    'with positions and mask removed, moving row {x} of X to the front did not move stage {name} the same way (largest difference {diff})': '去掉位置和掩码后，把 X 的第 {x} 行移到最前面，阶段 {name} 没有做同样的移动（最大差 {diff}）',
    'this probe': '这次探测',
    'the unchanged run': '未改动的运行',
    'the changed run': '改动后的运行',
    'perturbing {later} changed stage {stage} at {earlier} by up to {d}: {who} on later ones, although the mask is causal': '扰动{later}后，阶段 {stage} 在{earlier}处改变了最多 {d}：{who}后面的位置，尽管掩码是因果的',
    'position 0 depends': '位置 0 依赖',
    'positions up to {t} depend': '位置 0..{t} 依赖',
    "the block's {mask} mask lets position {i} read the later position {j}, so it is not causal: later positions may be read by design": '块的 {mask} 掩码让位置 {i} 读取其后的位置 {j}，因此不是因果的：按设计可以读取后面的位置',
}
