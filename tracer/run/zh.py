"""The Chinese of what tracer/run/ says, keyed by its English: the catalogue of this package's messages
(MESSAGES), plural forms (PLURALS) and UI words (UI), kept as tracer/zh.py keeps the whole (its docstring says how).
Nothing here imports anything."""

UI: dict[str, str] = {
    '{kind} at {stage}': '{stage} 处{kind}违规',
    ' ({note})': '（{note}）',
    ' ({kind} violation: tracer run flags it)': '（{kind}违规：tracer run 会标出它）',
}

MESSAGES: dict[str, str] = {
    '--with-weights adds the weights to the JSON output or the --save archive: give --json or --save too': '--with-weights 把权重加入 JSON 输出或 --save 存档：请同时给 --json 或 --save',
    '--verify-budget {verify_budget} must be at least 1': '--verify-budget {verify_budget} 至少为 1',
    "--save writes one spec's arrays: give one spec": '--save 写出一个 spec 的数组：请只给一个 spec',
    '--format csv writes every value of every stage, and --record stats keeps only statistics of the big ones: use --record all or main (or --keep the stages you want)': '--format csv 写出每个阶段的每个值，而 --record stats 对大的阶段只保留统计量：请用 --record all 或 main（或用 --keep 保留想要的阶段）',
    '--attention draws a picture; it does not combine with {x}': '--attention 画的是图；不能与 {x} 同用',
    "--svg and --html export one spec's view: give one spec": '--svg 和 --html 导出一个 spec 的视图：请只给一个 spec',
    '{path}: ok, needs about {size} to run (--record {r})': '{path}: 通过，运行约需 {size}（--record {r}）',
    'wrote {path} (preset {preset}); trace it with: tracer run {path}': '已写入 {path}（预设 {preset}）；用 tracer run {path} 运行它',
    'give --preset NAME, one of:': '请给出 --preset NAME，可选：',
    '--preset {name}: no such preset{hint}': '--preset {name}：没有这个预设{hint}',
    'the presets are:': '预设有：',
    '{ok} ok, {v}, {e}': '{ok} 个通过，{v}，{e}',
    "--steps shows one spec's step list; give one spec (received {n})": '--steps 显示一个 spec 的步骤列表；请只给一个 spec（实际给了 {n} 个）',
    'give at least one spec': '请至少给一个 spec',
    '--verify checks the kernels against the scalar reference, which knows no --ablate, --set or --from: give one or the other': '--verify 用标量参考实现核对内核，而参考实现不知道 --ablate、--set 或 --from：二者只能选一',
    '--top {top}: expected 0 or more next tokens (0 shows the first values)': '--top {top}：应为 0 个或更多下一个词元（0 显示前几个值）',
}

PLURALS: dict[tuple[str, str], str] = {
    ('{n} spec: {parts}; exit code {code}', '{n} specs: {parts}; exit code {code}'): '{n} 个 spec：{parts}；退出码 {code}',
    ('{n} with a violation', '{n} with violations'): '{n} 个有违规',
}
