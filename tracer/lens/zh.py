"""The Chinese of what tracer/lens/ says, keyed by its English: the catalogue of this package's messages
(MESSAGES), plural forms (PLURALS) and UI words (UI), kept as tracer/zh.py keeps the whole (its docstring says how).
Nothing here imports anything."""

UI: dict[str, str] = {
    'p(token), layers x positions, shaded up to the largest, {vmax} (░ ▒ ▓ █: up to 1/4, 1/2, 3/4, 1 of it; blank: below 1/8):': 'p(token)，层 × 位置，按最大值 {vmax} 着色（░ ▒ ▓ █：至多其 1/4、1/2、3/4、1；空白：低于 1/8）：',
}

MESSAGES: dict[str, str] = {
    '; run while {what}': '；运行时{what}',
    "--token {token}: not a word of the spec's vocab (give a word of it, or an id)": '--token {token}：不是 spec 的 vocab 中的词（请给出其中的词，或一个 id）',
    "--token {token}: this spec has no tokenizer and no vocab to read a token's text with: give an id": '--token {token}：这个 spec 既没有分词器也没有 vocab，无法按文本找词元：请给出 id',
    "logit lens of {name}, sample b={b}: each layer's residual through the final norm (with that layer's own statistics) and the head; p of {what}": '{name} 的 logit lens，样本 b={b}：每一层的残差路径经过最终归一化（用该层自己的统计量）和输出头；{what} 的概率',
    "the lens reads {name} in full, and this trace kept it {how}: trace with record='all' (or keep it)": "lens 需要完整的 {name}，而这次追踪{how}保留它：请用 record='all' 追踪（或 keep 它）",
    "the logit lens reads a decoder-only stack's residual stream; an encoder-decoder is not one": 'logit lens 读取仅解码器堆叠的残差路径；编码器-解码器不是这种结构',
    "the logit lens reruns the steps after the last layer on each layer's output; here they read more than that output": 'logit lens 在每一层的输出上重新运行最后一层之后的步骤；这里这些步骤读取的不止这个输出',
    "the model's own next token at each position": '模型自己在每个位置预测的下一个词元',
    '--token {token}: id {i} is out of range: the vocabulary has V = {V} ids (0 to {x})': '--token {token}：id {i} 超出范围：词表有 V = {V} 个 id（0 到 {x}）',
    '--top {top}: expected 1 or more tokens a cell shows': '--top {top}：每格应显示 1 个或更多词元',
    'as statistics': '只以统计量',
    'final layer: {what}': '最后一层：{what}',
    'not at all': '完全没有',
    'the logit lens needs the stream entering the first layer and the head after the last': 'logit lens 需要进入第一层的残差路径和最后一层之后的输出头',
    'the logit lens reads each layer through the final norm and the head, and this {order} stack has no final norm (block.final_norm: false): the head would read a residual no norm has scaled': 'logit lens 让每一层经过最终归一化和输出头，而这个 {order} 堆叠没有最终归一化（block.final_norm: false）：输出头读到的将是没有经过任何归一化缩放的残差',
    'the logit lens reads each layer through the head, and this spec has none (block.head: none): nothing scores the vocabulary': 'logit lens 让每一层经过输出头，而这个 spec 没有输出头（block.head: none）：没有东西给词表打分',
    'the logit lens reads the residual stream after each layer, and this spec has no layer': 'logit lens 读取每一层之后的残差路径，而这个 spec 没有层',
    'the run stopped at a {kind} violation at {stage}: the lens reads a finished run (tracer run shows the violation)': '运行在 {stage} 处因 {kind} 违规而停止：lens 读取的是完整的运行（tracer run 会显示这个违规）',
    'the token given': '给定的词元',
}
