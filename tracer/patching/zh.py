"""The Chinese of what tracer/patching/ says, keyed by its English: the catalogue of this package's messages
(MESSAGES), plural forms (PLURALS) and UI words (UI), kept as tracer/zh.py keeps the whole (its docstring says how).
Nothing here imports anything."""

MESSAGES: dict[str, str] = {
    '--format markdown: tracer patch writes table, json or csv': '--format markdown：tracer patch 只写 table、json 或 csv',
    'logit of {token} at b={b}, t={t}: clean {clean}, corrupt {corrupt}; patching {stage} at t={pos} moves it most, by {d}': 'b={b}, t={t} 处 {token} 的 logit：干净运行 {clean}，损坏运行 {corrupt}；修补 {stage} 在 t={pos} 处的值改变最大，为 {d}',
    "--stage {pattern}: no stage of {where} matches it{hint} (a pattern such as 'blocks.*.output'; `tracer run SPEC --steps` lists the stages)": "--stage {pattern}：{where} 中没有与之匹配的阶段{hint}（模式如 'blocks.*.output'；`tracer run SPEC --steps` 列出各阶段）",
    '--stage {name}: {shape} has no position axis to patch along': '--stage {name}：{shape} 没有可沿之修补的位置轴',
    "tracer patch follows a token's logit: the spec needs an output head (block.head: tied or separate)": 'tracer patch 跟踪一个 token 的 logit：spec 需要输出头（block.head: tied 或 separate）',
    '{name}: clean and corrupt must trace the same stages with the same shapes (two inputs to one model): expected {expected} as in {ref}, received {got} in {other}': '{name}：干净与损坏两次运行必须追踪形状相同的同一组阶段（同一模型的两个输入）：应为 {ref} 中的 {expected}，{other} 中实际为 {got}',
    'no such stage': '没有这个阶段',
    'activation patching: the logit of {token} at b={b}, t={t}, patched run minus corrupt run': '激活修补：b={b}, t={t} 处 {token} 的 logit，修补后的运行减去损坏运行',
    'shade: |change| against the largest, {vmax}; red raises the logit, blue lowers it': '深浅：|变化| 相对最大值 {vmax}；红色使 logit 升高，蓝色使其降低',
    'tracer patch needs both runs free of violations (`tracer run SPEC` shows them)': 'tracer patch 需要两次运行都没有违规（`tracer run SPEC` 会显示它们）',
}
