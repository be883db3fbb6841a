"""The Chinese of what tracer/check/ says, keyed by its English: the catalogue of this package's messages
(MESSAGES), plural forms (PLURALS) and UI words (UI), kept as tracer/zh.py keeps the whole (its docstring says how).
Nothing here imports anything."""

MESSAGES: dict[str, str] = {
    'where the NaN or infinite values began: {why}': 'NaN 或无穷大最先出现在：{why}',
    "the spec computes in {dtype}, whose value rounds otherwise at {p} decimals; your numbers are the exact value's (the spec in float64), and right": '这份 spec 用 {dtype} 计算，保留 {p} 位小数时舍入结果不同；你的数值与精确值（同一 spec 用 float64 计算）一致，是正确的',
    '--expect {text}: {token} is too big for a number (NaN and the infinities are written nan, inf, -inf)': '--expect {text}：{token} 太大，不是一个数（NaN 和无穷大写作 nan、inf、-inf）',
    '{path}: is empty; expected a mapping of answers such as {example}': '{path}：是空的；应是答案的映射，例如 {example}',
    '{path}: holds {kind}; expected a mapping of answers such as {example}': '{path}：里面是{kind}；应是答案的映射，例如 {example}',
    'wrong: {stage} at b={b}, t={t}: entries {i} of {v} differ at {p} decimals (counting from 0)': '错误：{stage} 在 b={b}, t={t} 处：{v} 的第 {i} 项在 {p} 位小数上不同（从 0 数起）',
    '--expect {text}: expected a list of numbers such as [1, -2, -1]': '--expect {text}：应为数的列表，例如 [1, -2, -1]',
    '{kind} violation at stage {stage}': '阶段 {stage} 的{kind}违规',
    'the end of the run': '运行的末尾',
    'cannot check {stage} at b={b}, t={t}: the run stopped at a {stopped} before reaching it (tracer run {path})': '无法检查 {stage} 在 b={b}, t={t} 处的值：运行在到达它之前停在了{stopped}（tracer run {path}）',
    'right: {stage} at b={b}, t={t} is {v} to {p} decimals': '正确：{stage} 在 b={b}, t={t} 处是 {v}（精确到 {p} 位小数）',
    'wrong: {stage} at b={b}, t={t}: entry {i} of {v} differs at {p} decimals (counting from 0)': '错误：{stage} 在 b={b}, t={t} 处：{v} 的第 {i} 项在 {p} 位小数上不同（从 0 数起）',
    '--expect {text}: {stage} at b={b}, t={t} has {n} numbers (the stage is {shape}); you gave {m}': '--expect {text}：{stage} 在 b={b}, t={t} 处有 {n} 个数（该阶段是 {shape}）；你给了 {m} 个',
    '{where}: {key}: expected STAGE, STAGE@T or STAGE@B,T (such as pre@1)': '{where}：{key}：应为 STAGE、STAGE@T 或 STAGE@B,T（例如 pre@1）',
    '{where}: {key}: expected a list of numbers such as [1, -2, -1]': '{where}：{key}：应为一列数，例如 [1, -2, -1]',
    "{path}: no answers (expected a mapping such as 'pre@0: [1, -2, -1]')": "{path}：没有答案（应为一个映射，例如 'pre@0: [1, -2, -1]'）",
    '--answers gives every stage and value: give it without --stage and --expect': '--answers 已给出每个阶段和值：请不要再同时给 --stage 和 --expect',
    'give --stage and --expect (one value), or --answers FILE (many)': '请给出 --stage 和 --expect（一个值），或 --answers FILE（多个）',
    'note: {note}': '注意：{note}',
}

PLURALS: dict[tuple[str, str], str] = {
    ('{n} answer: {right} right, {wrong} wrong, {errors}; exit code {code}', '{n} answers: {right} right, {wrong} wrong, {errors}; exit code {code}'): '{n} 个答案：{right} 个正确，{wrong} 个错误，{errors}；退出码 {code}',
}
