"""The Chinese of what tracer/front/ says, keyed by its English: the catalogue of this package's messages
(MESSAGES), plural forms (PLURALS) and UI words (UI), kept as tracer/zh.py keeps the whole (its docstring says how).
Nothing here imports anything."""

MESSAGES: dict[str, str] = {
    '--grad runs the backward pass, which needs the spec: give a YAML spec, not saved arrays or a saved trace': '--grad 要做反向传播，需要 spec：请给出 YAML spec，而不是保存的数组或运行记录',
    '{a} and {b}: this diff': '{a} 和 {b}：这次比较',
    'side A': 'A 侧',
    'side B': 'B 侧',
    'comparing': '比较',
    'side {label}: expected a path, a Spec, a spec dict, a Trace or a mapping of stage name -> array, received {name__}': 'side {label}：应为路径、Spec、spec 字典、Trace 或阶段名 -> 数组的映射，实际为 {name__}',
    'no axis {letter} in {x}': '{x} 中没有轴 {letter}',
    '; its stages: {names}': '；它的阶段：{names}',
    'no stage {name} in this trace{hint}': '这次运行记录中没有阶段 {name}{hint}',
    "{name} was kept as statistics (record='stats'), not in full; trace again with keep=[{quoted}] or record='all'": "{name} 只保存了统计量（record='stats'），不是完整的值；请用 keep=[{quoted}] 或 record='all' 重新运行",
    'no stage {name} in this trace (the run stopped at a {kind} violation at {stage}){hint}': '这次运行记录中没有阶段 {name}（运行在 {stage} 处的{kind}违规停止）{hint}',
    "a stage is named by text such as 'norm1', received {got}": "阶段名是文本，例如 'norm1'，实际为{got}",
    "names: expected a mapping of your array names to tracer's stage names (text), received {got}": 'names：应为从你的数组名到 tracer 阶段名（文本）的映射，实际为{got}',
    'reading its arrays': '读取其中的数组',
    'the arrays, as stored and as float64': '数组（按存储的类型，以及转为 float64 后）',
    'compare fewer or smaller arrays': '请比较更少或更小的数组',
    '--ablate, --set and --from change a run: side {label} must be a spec, not saved arrays or a saved trace': '--ablate、--set 和 --from 改变一次运行：{label} 侧必须是 spec，而不是保存的数组或保存的追踪',
    '--token: a side has no logits (a spec with head: tied or separate has them)': '--token：有一侧没有 logits（带 head: tied 或 separate 的 spec 才有）',
    "token: expected a token's text or id, received {got}": 'token：应为词元的文本或 id，实际为{got}',
    'give tokens or text, not both': '请给出 tokens 或 text，不要两者都给',
    "another input needs the spec's document: load the model from a path or a dict": '换一个输入需要 spec 的文档：请从路径或字典加载模型',
    'tokens: expected token ids, one sample [T] or a batch [B][T], received {got}': 'tokens：应为词元 id，一个样本 [T] 或一批 [B][T]，实际为{got}',
    "loading the model's weights": '加载模型的权重',
    'its weights': '它的权重',
    'give the spec fewer layers (block.layers)': '请让 spec 的层数少一些（block.layers）',
}
