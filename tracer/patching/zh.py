"""The Chinese of what tracer/patching/ says, keyed by its English: the catalogue of this package's messages
(MESSAGES), plural forms (PLURALS) and UI words (UI), kept as tracer/zh.py keeps the whole (its docstring says how).
Nothing here imports anything."""

MESSAGES: dict[str, str] = {
    '--format markdown: tracer patch writes table, json or csv': '--format markdown：tracer patch 只写 table、json 或 csv',
    '{what} at {where}, t={t}: clean {clean}, corrupt {corrupt}; patching {stage} at {pos} moves it most, by {d}': '{where}, t={t} 处 {what}：干净运行 {clean}，损坏运行 {corrupt}；修补 {stage} 在 {pos} 处的值改变最大，为 {d}',
    'logit of {token}': '{token} 的 logit',
    'the logit of {token}': '{token} 的 logit',
    'the mean over b={first}..{last}': 'b={first}..{last} 的平均',
    '--normalise: the clean and the corrupt run give {label} the same value {v} in sample {b}, so there is no change to take a share of': '--normalise：干净与损坏两次运行在样本 {b} 中给出相同的 {label} = {v}，没有可以按比例计算的变化',
    '{option}: give one token for every sample or one a sample ({n}), received {got}': '{option}：给出所有样本共用的一个 token，或每个样本一个（{n} 个），收到的是 {got} 个',
    '--metric {got}: expected one of {choices}': '--metric {got}：应为 {choices} 之一',
    '--against is for --metric logit-diff, received --metric {got}': '--against 用于 --metric logit-diff，收到的是 --metric {got}',
    '--metric logit-diff: give --against ID|TEXT, the token whose logit is taken off': '--metric logit-diff：请给出 --against ID|TEXT，即要减去其 logit 的 token',
    '--positions {got}: expected each (a column a position) or all (every position at once)': '--positions {got}：应为 each（每个位置一列）或 all（一次修补所有位置）',
    "--stage {name}: its {n} positions are not the logits' T = {T}; patch it with --positions all": '--stage {name}：它的 {n} 个位置与 logits 的 T = {T} 不同；请用 --positions all 修补它',
    'activation patching: {what} at {where}, t={t}, patched run minus corrupt run': '激活修补：{where}, t={t} 处 {what}，修补后的运行减去损坏运行',
    'path patching: {what} at {where}, t={t}, patched run minus corrupt run': '路径修补：{where}, t={t} 处 {what}，修补后的运行减去损坏运行',
    'activation patching: {what} at {where}, t={t}, (patched - corrupt) / (clean - corrupt): 0 is the corrupt run, 1 the clean one': '激活修补：{where}, t={t} 处 {what}，(修补 - 损坏) / (干净 - 损坏)：0 为损坏运行，1 为干净运行',
    'path patching: {what} at {where}, t={t}, (patched - corrupt) / (clean - corrupt): 0 is the corrupt run, 1 the clean one': '路径修补：{where}, t={t} 处 {what}，(修补 - 损坏) / (干净 - 损坏)：0 为损坏运行，1 为干净运行',
    'shade: |change| against the largest, {vmax}; red raises the metric, blue lowers it': '深浅：|变化| 相对最大值 {vmax}；红色使指标升高，蓝色使其降低',
    "{what} at {where}, t={t}: clean {clean}, corrupt {corrupt}; the path from {stage} to the later heads' {part} moves it most, by {d}": '{where}, t={t} 处 {what}：干净运行 {clean}，损坏运行 {corrupt}；从 {stage} 到后面各头的 {part} 的路径改变最大，为 {d}',
    "--sender {pattern}: no head of {where} matches it{hint} (a head's output such as blocks.0.attn.head.1, or a pattern such as 'blocks.*.attn.head.*')": "--sender {pattern}：{where} 中没有与之匹配的头{hint}（头的输出如 blocks.0.attn.head.1，或模式如 'blocks.*.attn.head.*'）",
    "--receiver {got}: expected q, k or v (the input of the receivers' queries, keys or values)": '--receiver {got}：应为 q、k 或 v（接收头的查询、键或值的输入）',
    '--sender {name}: no self-attention comes after it, so it has no receivers; path patching needs a sender before the last layer': '--sender {name}：它之后没有自注意力，因此没有接收头；路径修补需要最后一层之前的发送头',
    '--receiver is for path patching: give --sender HEAD too': '--receiver 用于路径修补：请同时给出 --sender HEAD',
    '--sender: path patching patches the sender at every position into the later heads; --stage and --positions are for activation patching': '--sender：路径修补在所有位置把发送头修补进后面的各头；--stage 和 --positions 用于激活修补',
    'each cell: the mean over {n} samples, ±its standard deviation, its min..max': '每格：{n} 个样本的平均、±标准差、最小值..最大值',
    "--stage {pattern}: no stage of {where} matches it{hint} (a pattern such as 'blocks.*.output'; `tracer run SPEC --steps` lists the stages)": "--stage {pattern}：{where} 中没有与之匹配的阶段{hint}（模式如 'blocks.*.output'；`tracer run SPEC --steps` 列出各阶段）",
    '--stage {name}: {shape} has no position axis to patch along': '--stage {name}：{shape} 没有可沿之修补的位置轴',
    "tracer patch follows a token's logit: the spec needs an output head (block.head: tied or separate)": 'tracer patch 跟踪一个 token 的 logit：spec 需要输出头（block.head: tied 或 separate）',
    '{name}: clean and corrupt must trace the same stages with the same shapes (two inputs to one model): expected {expected} as in {ref}, received {got} in {other}': '{name}：干净与损坏两次运行必须追踪形状相同的同一组阶段（同一模型的两个输入）：应为 {ref} 中的 {expected}，{other} 中实际为 {got}',
    'no such stage': '没有这个阶段',
    'shade: |change| against the largest, {vmax}; red raises the logit, blue lowers it': '深浅：|变化| 相对最大值 {vmax}；红色使 logit 升高，蓝色使其降低',
    'tracer patch needs both runs free of violations (`tracer run SPEC` shows them)': 'tracer patch 需要两次运行都没有违规（`tracer run SPEC` 会显示它们）',
}

UI: dict[str, str] = {
    'sender head': '发送头',
}
