"""The Chinese catalogue (the book's words), keyed by the English tracer makes: the words several packages share
here, each package's own beside its messages (tracer/compare/zh.py, tracer/grade/zh.py, ...), all keyed the same
way and put together below into the tables the lookups read.

- MESSAGES: every message template (tracer.messages.msg), English with {fields} -> Chinese with the
  same fields.  The fields are filled in after the lookup: a field that is itself a message is
  rendered in Chinese too; paths, shapes, numbers, names and code are carried over verbatim.
  A stage meaning in Table 17.1's words may leave its formula's letters out ({LN}, {actf}).
- PLURALS: nmsg's (singular, plural) pairs -> one Chinese form (Chinese has no plural).
- UI: table headers, captions, labels and status words (tracer.i18n.tr), English -> Chinese.
- KINDS: the violation kinds' words; SEPARATORS: join()'s separators.

Stage meanings follow Table 17.1: the chapter's pre-norm block is exactly the table's "阶段"
column (X, N_1, U, R, N_2, "FFN 的 ReLU 之后", "FFN 输出", Y); the others follow its style and the
book's and the guide's terms (残差相加, 归一化, 前馈网络, 注意力, 因果掩码, 交叉注意力, 位置编码,
编码器, 解码器).  An op's own meaning is in its record (tracer/model/ops.py, messages.given).

Punctuation: Chinese text uses full-width ，：；（）; file:line:col, field paths, shapes,
formulas and code keep their ASCII form, so they read (and grep) the same in both languages.
tests/foundation/test_messages.py checks that every template the code makes has an entry here with the same
fields, and that every entry is used.  Nothing here imports anything but the packages' catalogues.
"""


from __future__ import annotations

from tracer.check import zh as check_zh
from tracer.checkpoints import zh as checkpoints_zh
from tracer.cli import zh as cli_zh
from tracer.compare import zh as compare_zh
from tracer.engine import zh as engine_zh
from tracer.front import zh as front_zh
from tracer.grad import zh as grad_zh
from tracer.grade import zh as grade_zh
from tracer.graph import zh as graph_zh
from tracer.lens import zh as lens_zh
from tracer.model import zh as model_zh
from tracer.page import zh as page_zh
from tracer.patching import zh as patching_zh
from tracer.probe import zh as probe_zh
from tracer.run import zh as run_zh
from tracer.spec import zh as spec_zh
from tracer.views import zh as views_zh

KINDS = {'broadcast': '广播', 'axis': '轴', 'position': '位置', 'nonfinite': '非有限值', 'causality': '因果性', 'verify': '核对'}


# join(parts, sep): the separator in Chinese
SEPARATORS = {'; ': '；', ', ': '，'}


SHARED_UI: dict[str, str] = {
    **KINDS,
    'stage': '记录名',
    'what it is': '阶段',
    'value at b={b}, t={t}{word}': 'b={b}, t={t}{word} 处的值',
    'value at b=0, t=0{word}': '第一个位置{word}',
    'shape': '整个数组的 shape',
    'max |NumPy - reference|': 'max |NumPy - 参考实现|',
    'pre-norm': 'Pre-Norm',
    'post-norm': 'Post-Norm',
    'custom steps': '自定义步骤',
    '{label}: ': '{label}：',
    '#': '#',
    'op': 'op',
    'reads': '读取',
    'weights': '权重',
    'settings': '设置',
    'ok': '通过',
    'error': '错误',
    'tracer: error: ': 'tracer: 错误：',
    'tracer: note: ': 'tracer: 注意：',
    'interrupted': '已中断',
    'terminated': '已终止',
    'pass': '通过',
    'fail': '不通过',
    'not applicable': '不适用',
    'cannot measure': '无法测量',
    'permutation equivariance': '置换等变性',
    'formula': '公式',
    'before the block': '进入块之前',
    'pre-norm layer (norm_order: pre, Example 17.2)': 'Pre-Norm 层（norm_order: pre，例 17.2）',
    'post-norm layer (norm_order: post, section 17.6)': 'Post-Norm 层（norm_order: post，17.6 节）',
    'attention internals (shown with --all)': '注意力内部（--all 时显示）',
    'after the last layer': '最后一层之后',
    'encoder-decoder (model: encoder-decoder)': '编码器—解码器（model: encoder-decoder）',
    'variants (block.norm, block.activation)': '变体（block.norm、block.activation）',
    'In a stack (block.layers > 1) every layer stage is prefixed with its layer: blocks.0.norm1, blocks.1.norm1, ...; in an encoder-decoder with encoder.blocks.N. and decoder.blocks.N.': '在堆叠中（block.layers > 1），每一层的记录名前加上所在层：blocks.0.norm1、blocks.1.norm1……；编码器—解码器中加 encoder.blocks.N. 和 decoder.blocks.N.',
    'A': 'A',
    'B': 'B',
    'setting': '设置项',
    'shape A': 'A 的 shape',
    'shape B': 'B 的 shape',
    'at': '位置',
    'A there': 'A 在该处',
    'B there': 'B 在该处',
    'equal': '相等',
    'differs': '不同',
    'shapes differ': 'shape 不同',
    'only in A': '仅 A 有',
    'only in B': '仅 B 有',
    '  ← first difference': '  ← 第一处不同',
    'not recorded': '未记录',
    'Structure: the two step lists, aligned by step name': '结构：两份步骤列表，按步骤名对齐',
    'Settings that differ': '不同的设置',
    'rows of E': 'E 的行',
    'rows of P': 'P 的行',
    'the given input': '给定的输入',
    'sinusoidal table': '正余弦表',
    'computes': '计算',
    'stored weights': '保存的权重',
    '┬ … ⊕ ': '┬ … ⊕ ',
    'layer': '层',
    'weight': '权重',
    'same': '相同',
    'different': '不同',
    'parallel layers (norm_order: parallel, GPT-NeoX; parallel_shared, Phi)': '并行层（norm_order: parallel，GPT-NeoX；parallel_shared，Phi）',
    'parallel residual': '并行残差',
    'parallel residual, one norm': '并行残差，共用一个归一化',
    "sandwich norms (each sublayer's output normalised before its residual add)": '夹心归一化（每个子层的输出在残差相加之前先归一化）',
}


SHARED_MESSAGES: dict[str, str] = {
    'is not a NumPy .npy array (bad magic bytes)': '不是 NumPy 的 .npy 数组（魔数不对）',
    'is truncated (its .npy header is cut short)': '被截断了（它的 .npy 头不完整）',
    'cannot read: {x}': '无法读取：{x}',
    '; did you mean {names}?': '；是不是想写 {names}？',
    "--lang {option}: expected one of zh | en (zh: the book's Chinese, en: English){hint}": '--lang {option}：应为 zh | en 之一（zh：书中的中文，en：英文）{hint}',
    'internal error: {what}': '内部错误：{what}',
    'no such file': '文件不存在',
    '{label} ({path}): {kind} violation: {message}': '{label}（{path}）：{kind}违规：{message}',
    'boolean {v}': '布尔值 {v}',
    'a list': '一个列表',
    'text {v}': '文本 {v}',
    'text': '文本',
    'true or false': 'true 或 false',
    'a whole number': '整数',
    '{meaning}, turned by rotary positions': '{meaning}，经旋转位置编码转动',
    'refusing to overwrite it (delete it, choose another name, or give --force to replace it)': '拒绝覆盖它（请删除它、换一个名字，或用 --force 替换它）',
    '{option} {path}: the file keeps changing while tracer writes it; nothing was written': '{option} {path}: tracer 写入期间文件一直在变；没有写入任何内容',
    '{f} exists and is not a regular file': '{f} 已存在，且不是普通文件',
    '{opt}: expected a file name such as report.{kind}': '{opt}: 应为文件名，例如 report.{kind}',
    '{f} cannot be examined: {why}': '无法检查 {f}：{why}',
    '{opt} would overwrite the input {inp}; choose another file name': '{opt} 会覆盖输入 {inp}；请换一个文件名',
    'cannot write there: {f} does not exist': '无法写入：{f} 不存在',
    'cannot write there: the folder {f} is not writable': '无法写入：文件夹 {f} 不可写',
    'cannot write {path}: {x}; nothing was written': '无法写入 {path}：{x}；没有写入任何内容',
    '{f} is a symbolic link': '{f} 是符号链接',
    'tracer never writes through or over a link (name the file itself, or remove the link)': 'tracer 从不经由链接写入，也不覆盖链接（请给出文件本身，或删除链接）',
    '{f} is a directory': '{f} 是目录',
    'give a file name inside it, e.g. {g}': '请给出其中的文件名，例如 {g}',
    '{f} already exists': '{f} 已经存在',
    'tracer never overwrites a file here (choose another name)': 'tracer 不会覆盖这里已有的文件（请换一个名字）',
    '{f} exists and is read-only (mode {m})': '{f} 已存在，且是只读的（权限 {m}）',
    'tracer never replaces a file it may not write (make it writable, or choose another name)': 'tracer 从不替换它无权写入的文件（请让它可写，或换一个名字）',
    '{f} exists and is not an {kind} file tracer wrote': '{f} 已存在，且不是 tracer 写的 {kind} 文件',
    'cannot write there: {f} is not a folder': '无法写入：{f} 不是文件夹',
    '{opt_a} and {opt_b} name the same file {a}: give each its own name': '{opt_a} 和 {opt_b} 指向同一个文件 {a}：请各给一个名字',
    '{f} exists and is not a {kind} file tracer wrote': '{f} 已存在，且不是 tracer 写的 {kind} 文件',
    'it appeared or changed during the run, and nothing was written': '它在运行期间出现或被改动，没有写入任何内容',
    '{mask} mask': '{mask} 掩码',
    'post-norm': 'Post-Norm',
    'ReLU({a} W_1 + b_1) = max({a} W_1 + b_1, 0)': 'ReLU({a} W_1 + b_1) = max({a} W_1 + b_1, 0)',
    'GELU({a} W_1 + b_1), GELU(z) = z Phi(z) = z/2 (1 + erf(z / sqrt 2))': 'GELU({a} W_1 + b_1), GELU(z) = z Phi(z) = z/2 (1 + erf(z / sqrt 2))',
    "GELU({a} W_1 + b_1), GPT-2's tanh approximation z/2 (1 + tanh(sqrt(2/pi) (z + 0.044715 z^3)))": 'GELU({a} W_1 + b_1)，GPT-2 的 tanh 近似 z/2 (1 + tanh(sqrt(2/pi) (z + 0.044715 z^3)))',
    'silu({a} W_1 + b_1) * ({a} W_3 + b_3), silu(z) = z sigmoid(z)': 'silu({a} W_1 + b_1) * ({a} W_3 + b_3), silu(z) = z sigmoid(z)',
    'silu({a} W_1 + b_1), silu(z) = z sigmoid(z) = z / (1 + exp(-z))': 'silu({a} W_1 + b_1)，silu(z) = z sigmoid(z) = z / (1 + exp(-z))',
    'ReLU²({a} W_1 + b_1) = max({a} W_1 + b_1, 0)^2, the squared ReLU': 'ReLU²({a} W_1 + b_1) = max({a} W_1 + b_1, 0)^2，平方 ReLU',
    '{a} W_Q + b_Q, split into H heads: head h takes columns h*d .. (h+1)*d - 1': '{a} W_Q + b_Q，拆成 H 个头：头 h 取第 h*d .. (h+1)*d - 1 列',
    '{b} W_K + b_K, split into heads': '{b} W_K + b_K，拆成多个头',
    '{b} W_V + b_V, split into heads': '{b} W_V + b_V，拆成多个头',
    'Q_h K_h^T / sqrt(d), one row per query, one column per key': 'Q_h K_h^T / sqrt(d)，每个查询一行，每个键一列',
    'softmax over keys of the scores, masked keys set to -inf first (so their weight is 0)': '对分数沿键做 softmax，先把被遮挡的键设为 -inf（所以它们的权重为 0）',
    'weights_h V_h for every head, concatenated back to width C': '每个头的 weights_h V_h，拼接回宽度 C',
    'coordinates': '坐标',
    'hidden units': '隐藏单元',
    'heads': '头',
    'E[token id]: one row of the token table E per position': 'E[token id]：每个位置取 token 表 E 的一行',
    'the matrix given as input.x': 'input.x 给出的矩阵',
    'P[0:T]: rows 0 .. T-1 of the learned table P [T_max,C]': 'P[0:T]：学习得到的位置表 P [T_max,C] 的第 0 .. T-1 行',
    'PE[t, 2i] = sin(t / base^(2i/C)), PE[t, 2i+1] = cos(t / base^(2i/C))': 'PE[t, 2i] = sin(t / base^(2i/C)), PE[t, 2i+1] = cos(t / base^(2i/C))',
    '{a} + {b} (the position table added to every sample)': '{a} + {b}（位置表加到每个样本上）',
    '{a} E^T (head: tied) or {a} W_head (head: separate)': '{a} E^T（head: tied）或 {a} W_head（head: separate）',
    'exp({a} - max) / sum over V of exp({a} - max)': 'exp({a} - max) / 沿 V 求和的 exp({a} - max)',
    'gamma * ({a} - mean) / sqrt(var + eps) + beta, mean and var over the C coordinates of each row': 'gamma * ({a} - mean) / sqrt(var + eps) + beta，mean 和 var 在每一行的 C 个坐标上计算',
    'gamma * {a} / sqrt(mean({a}^2) + eps), over the C coordinates of each row (no mean subtracted, no beta)': 'gamma * {a} / sqrt(mean({a}^2) + eps)，在每一行的 C 个坐标上计算（不减均值，没有 beta）',
    'gamma * ({a} - mean) / sqrt(var + eps) + beta, mean and var over samples and positions (B and T)': 'gamma * ({a} - mean) / sqrt(var + eps) + beta，mean 和 var 跨样本和位置（B 和 T）计算',
    'concat over heads h of softmax(mask(Q_h K_h^T / sqrt(d))) V_h, times W_O, plus b_O; Q = {a} W_Q + b_Q, K = {a} W_K + b_K, V = {a} W_V + b_V': '把各头 h 的 softmax(mask(Q_h K_h^T / sqrt(d))) V_h 拼接，乘 W_O，加 b_O；Q = {a} W_Q + b_Q, K = {a} W_K + b_K, V = {a} W_V + b_V',
    'as MHA, with Q = {a} W_Q + b_Q and K, V from {b} (the encoder output); no mask': '同 MHA，Q = {a} W_Q + b_Q，K、V 来自 {b}（编码器的输出）；无掩码',
    '{a} + {b}, the same shape on both sides (a residual add)': '{a} + {b}，两边 shape 相同（残差相加）',
    'act({a} W_1 + b_1) W_2 + b_2': 'act({a} W_1 + b_1) W_2 + b_2',
    'act({a} W_1 + b_1)': 'act({a} W_1 + b_1)',
    '{a} W_2 + b_2': '{a} W_2 + b_2',
    '{a} W + b': '{a} W + b',
    'max({a}, 0)': 'max({a}, 0)',
    '{a}[start:stop] along one axis': '沿一个轴取 {a}[start:stop]',
    '{a}': '{a}',
    'rows of E for the {tokens}': '{tokens}对应的 E 的行',
    'input.{stream}, as given': 'input.{stream}，原样给出',
    'rows 0 .. {pos}-1 of P': 'P 的第 0 .. {pos}-1 行',
    'sin / cos of the position, base {base}': '位置的 sin / cos，底数 {base}',
    '{a} + {b}': '{a} + {b}',
    '{x} {head}': '{x} {head}',
    'softmax({x}) over V': '沿 V 做 softmax({x})',
    'layer_norm({x}) over {axis}': '沿 {axis} 做 layer_norm({x})',
    'rms_norm({x}) over C': '沿 C 做 rms_norm({x})',
    'batch_norm({x}) over B and T': '跨 B 和 T 做 batch_norm({x})',
    'mha({ins}), {mask}{rotary}{over}': 'mha({ins})，{mask}{rotary}{over}',
    'cross_mha({ins}), {mask}{rotary}{over}': 'cross_mha({ins})，{mask}{rotary}{over}',
    '{hidden} W_2 + b_2': '{hidden} W_2 + b_2',
    '{hidden}': '{hidden}',
    '{x} W_2 + b_2': '{x} W_2 + b_2',
    '{x} W + b, to width {out}': '{x} W + b，宽度变为 {out}',
    'ReLU({x})': 'ReLU({x})',
    '{x}, {axis} {start}:{stop} (the axis kept)': '{x}，{axis} {start}:{stop}（保留该轴）',
    '{x}': '{x}',
    'standard output is closed': '标准输出已关闭',
    'cannot write the output: {why}': '无法写出输出：{why}',
    'standard output was closed by its reader': '标准输出被它的读取方关闭了',
    'queries': '查询',
    'keys': '键',
    '--format {fmt}: expected one of {names}{fmt2}': '--format {fmt}：应为 {names} 之一{fmt2}',
    '--json is short for --format json; it cannot be combined with --format {fmt}': '--json 是 --format json 的简写；不能与 --format {fmt} 同用',
    'internal error: {what} (a bug in tracer; please report it)': '内部错误：{what}（这是 tracer 的缺陷，请报告）',
    'a single value': '单个值',
    'a mapping': '一个映射（mapping）',
    'nothing (null)': '空值（null）',
    'expected {what}, received {got}': '应为{what}，实际为{got}',
    'a number': '数',
    '{f} appeared or changed during the run, and nothing was written': '{f} 在运行期间出现或被改动，没有写入任何内容',
    'is outside the folder --confine allows; a spec may refer only to files inside it': '在 --confine 允许的文件夹之外；spec 只能引用该文件夹内的文件',
    '--confine {f}: expected a folder': '--confine {f}：应为一个文件夹',
    'the path holds a NUL byte': '路径中含有 NUL 字节',
    "the path cannot be written in this system's file-name encoding (set a UTF-8 locale, or PYTHONUTF8=1)": '路径无法用本系统的文件名编码表示（请设置 UTF-8 的 locale，或 PYTHONUTF8=1）',
    'is truncated: {n} bytes were due, {got} came': '被截断了：应有 {n} 字节，只读到 {got} 字节',
    '{what} of {n} bytes that is not UTF-8 text': '{what}，共 {n} 字节，不是 UTF-8 文本',
    '{what} of {n} bytes that nests deeper than {depth} levels, or is not valid JSON': '{what}，共 {n} 字节，嵌套超过 {depth} 层，或不是有效的 JSON',
    '{what} of {n} bytes that is not valid JSON': '{what}，共 {n} 字节，不是有效的 JSON',
    'has a malformed .npy header of {n} bytes; the file is corrupt': '.npy 头（{n} 字节）格式不对；文件已损坏',
    'holds a structured array (named fields), expected an array of numbers': '存的是结构化数组（带命名字段），应为数值数组',
    'is an .npy file of format version {v}, which tracer does not read (1, 2 and 3 are read)': '是格式版本 {v} 的 .npy 文件，tracer 不读这个版本（只读 1、2、3）',
    'has an .npy header of {n} bytes, more than the {limit} NumPy reads; the file is corrupt or hostile': '.npy 头有 {n} 字节，超过 NumPy 所读的 {limit} 字节；文件已损坏或是恶意构造的',
    'Python objects (a pickle)': 'Python 对象（pickle）',
    'a type tracer does not know': 'tracer 不认识的类型',
    'member {name} is encrypted; tracer reads unencrypted archives only': '成员 {name} 是加密的；tracer 只读未加密的归档',
    'member {name} uses a compression tracer does not read (method {method})': '成员 {name} 用了 tracer 不读的压缩方式（方法 {method}）',
    'is a directory, expected a file': '是一个目录，应为文件',
    'permission denied': '没有权限',
    'is not a regular file (a pipe, socket or device); tracer reads regular files only': '不是普通文件（是管道、套接字或设备）；tracer 只读普通文件',
    '{what} would need about {need} bytes to parse, more than --max-memory allows ({limit} bytes)': '{what}需要约 {need} 字节来解析，超过了 --max-memory 允许的 {limit} 字节',
    'a zip directory of {n} bytes': '{n} 字节的 zip 目录',
    '{what} of {n} bytes': '{what}（{n} 字节）',
    "the path's name is not UTF-8 text, which a spec cannot write; rename the file or folder": '路径的名字不是 UTF-8 文本，spec 无法写出它；请给文件或文件夹改名',
    'is larger than {limit} bytes, the most {what} may be': '大于 {limit} 字节，这是{what}的上限',
    'E_type[token type]: one row of the token-type table E_type [V_type,C] per position (input.token_types; zeros when not given)': 'E_type[token 类型]：每个位置取 token 类型表 E_type [V_type,C] 的一行（input.token_types；未给出时全为 0）',
    'P[o:o+T]: rows o .. o+T-1 of the learned table P [T_max,C] (RoBERTa: o = padding_idx + 1)': 'P[o:o+T]：学习得到的位置表 P [T_max,C] 的第 o .. o+T-1 行（RoBERTa：o = padding_idx + 1）',
    'rows of E_type for the token types': 'token 类型对应的 E_type 的行',
    'rows {start} .. {start}+{pos}-1 of P': 'P 的第 {start} .. {start}+{pos}-1 行',
    'parallel residual': '并行残差',
    'parallel residual, one norm': '并行残差，共用一个归一化',
    '{a} W_g: one logit per expert (W_g [C,E], no bias)': '{a} W_g：每个专家一个 logit（W_g [C,E]，无偏置）',
    '{x} W_g, one logit per expert': '{x} W_g，每个专家一个 logit',
    "exp({a} - max) / sum over E of exp({a} - max): each position's probabilities over the experts sum to 1": 'exp({a} - max) / 沿 E 求和 exp({a} - max)：每个位置在专家上的概率之和为 1',
    'softmax({x}) over {axis}': '沿 {axis} 对 {x} 做 softmax',
    'the k largest of {a} at each position, renormalised to sum to 1 (ties: the lower expert); 0 for the others': '每个位置取 {a} 中最大的 k 个，重新归一化使和为 1（相等时取编号小的专家）；其余为 0',
    'the k largest of {x}, renormalised': '{x} 中最大的 k 个，重新归一化',
    'sum over the chosen experts e of {b}[e] * (silu({a} W1_e) * ({a} W3_e)) W2_e': '对所选专家 e 求和 {b}[e] * (silu({a} W1_e) * ({a} W3_e)) W2_e',
    'the chosen SwiGLU experts of {x}, weighted by {b}': '{x} 经所选的 SwiGLU 专家，按 {b} 加权',
    'attention': '注意力',
    "{a} * sqrt(C): every embedding times the square root of the width C, sqrt(C) rounded to the run's dtype (Gemma's normaliser)": '{a} * sqrt(C)：每个嵌入乘以宽度 C 的平方根，sqrt(C) 先舍入到本次运行的 dtype（Gemma 的归一化因子）',
    '{x} * sqrt(C)': '{x} * sqrt(C)',
    "(1 + gamma) * {a} / sqrt(mean({a}^2) + eps), over the C coordinates of each row (Gemma's RMSNorm: gamma = 0 is the identity scale)": '(1 + gamma) * {a} / sqrt(mean({a}^2) + eps)，沿每行的 C 个坐标计算（Gemma 的 RMSNorm：gamma = 0 即不缩放）',
    'rms_norm({x}) over C, times (1 + gamma)': '沿 C 做 rms_norm({x})，再乘以 (1 + gamma)',
    'GELU_tanh({a} W_1 + b_1) * ({a} W_3 + b_3), the tanh approximation z/2 (1 + tanh(sqrt(2/pi) (z + 0.044715 z^3)))': 'GELU_tanh({a} W_1 + b_1) * ({a} W_3 + b_3)，tanh 近似 z/2 (1 + tanh(sqrt(2/pi) (z + 0.044715 z^3)))',
    '{meaning}, RMS-normalised per head': '{meaning}，逐头做 RMS 归一化',
    '--no-special says whether the tokenizer adds its special tokens to --text: give --text too': '--no-special 指定分词器是否给 --text 加特殊词元：请同时给出 --text',
    "sandwich norms (each sublayer's output normalised before its residual add)": '夹心归一化（每个子层的输出在残差相加之前先归一化）',
    'cap * tanh({a} / cap): every value squashed smoothly into (-cap, cap), nearly unchanged where |{a}| << cap': 'cap * tanh({a} / cap)：每个值被平滑地压进 (-cap, cap)，在 |{a}| << cap 处几乎不变',
    'cap * tanh({x} / cap), cap = {cap}': 'cap * tanh({x} / cap)，cap = {cap}',
    "B[h, i, j] = table[bucket(j - i), h]: T5's buckets of the distance (exact below max_exact, logarithmic up to max_distance), one bias per head, added to the scores of every self-attention of the stack": 'B[h, i, j] = table[bucket(j - i), h]：T5 按距离分桶（max_exact 以下逐个精确，到 max_distance 为止按对数加宽），每个头一个偏置，加到该堆叠每个自注意力的分数上',
    'table[bucket(j - i)], {buckets} buckets up to distance {distance}{direction}': 'table[bucket(j - i)]，{buckets} 个桶，距离到 {distance} 为止{direction}',
    '{x} * C^-1/2': '{x} * C^-1/2',
    "{a} * C^-1/2: every coordinate times 1 / sqrt(C), C ** -0.5 rounded to the run's dtype (T5's tied head: sequence_output * model_dim**-0.5)": '{a} * C^-1/2：每个坐标乘以 1 / sqrt(C)，C ** -0.5 先舍入到本次运行的 dtype（T5 共享权重的输出层：sequence_output * model_dim**-0.5）',
    "{a} * s: every value times the step's scale s, s rounded to the run's dtype (Granite's embedding_multiplier, residual_multiplier)": '{a} * s：每个值乘以该步的 scale s，s 先舍入到本次运行的 dtype（Granite 的 embedding_multiplier、residual_multiplier）',
    "{a} / s: every value divided by the step's scale s, s rounded to the run's dtype (Granite's logits_scaling)": '{a} / s：每个值除以该步的 scale s，s 先舍入到本次运行的 dtype（Granite 的 logits_scaling）',
    '{x} * {scale}': '{x} * {scale}',
    '{x} / {scale}': '{x} / {scale}',
    '{meaning}, after the RMS norm of the whole projection': '{meaning}，在整个投影做 RMS 归一化之后',
}


SHARED_PLURALS: dict[tuple[str, str], str] = {
    ('{n} error', '{n} errors'): '{n} 个出错',
}


UI: dict[str, str] = {**SHARED_UI, **cli_zh.UI, **compare_zh.UI, **grad_zh.UI, **grade_zh.UI, **graph_zh.UI, **lens_zh.UI, **probe_zh.UI, **run_zh.UI, **views_zh.UI}

MESSAGES: dict[str, str] = {**SHARED_MESSAGES, **check_zh.MESSAGES, **checkpoints_zh.MESSAGES, **cli_zh.MESSAGES, **compare_zh.MESSAGES, **engine_zh.MESSAGES, **front_zh.MESSAGES, **grad_zh.MESSAGES, **grade_zh.MESSAGES, **graph_zh.MESSAGES, **lens_zh.MESSAGES, **model_zh.MESSAGES, **page_zh.MESSAGES, **patching_zh.MESSAGES, **probe_zh.MESSAGES, **run_zh.MESSAGES, **spec_zh.MESSAGES, **views_zh.MESSAGES}

PLURALS: dict[tuple[str, str], str] = {**SHARED_PLURALS, **check_zh.PLURALS, **checkpoints_zh.PLURALS, **cli_zh.PLURALS, **compare_zh.PLURALS, **engine_zh.PLURALS, **grade_zh.PLURALS, **graph_zh.PLURALS, **model_zh.PLURALS, **run_zh.PLURALS, **spec_zh.PLURALS, **views_zh.PLURALS}
