"""The Chinese of what tracer/grade/ says, keyed by its English: the catalogue of this package's messages
(MESSAGES), plural forms (PLURALS) and UI words (UI), kept as tracer/zh.py keeps the whole (its docstring says how).
Nothing here imports anything."""

UI: dict[str, str] = {
    'not graded': '未评',
    'incomplete': '不完整',
    'violation': '违规',
    'student': '学生',
    'task': '任务',
    'score': '得分',
    'verdict': '结论',
    'first diverging': '最先分歧的阶段',
    'note': '说明',
    'missing': '未提交',
    'no reference': '无参考',
}

MESSAGES: dict[str, str] = {
    '{fields} differ but change no number of this run: no point lost': '{fields} 不同，但没有改变这次运行的任何数值：不扣分',
    'hint: {hint}': '提示：{hint}',
    'recorded arrays: graded on runs, contract and stages ({n} points); arrays show no structure or settings': '记录的数组：按能运行、约定和各阶段评分（共 {n} 分）；数组看不出结构和设置',
    'a symbolic link to a file outside the folder: not followed': '指向文件夹之外的符号链接：不跟随',
    'a symbolic link: tracer does not follow links in a class folder (copy the file in instead)': '符号链接：tracer 不跟随班级文件夹里的链接（请把文件本身复制进来）',
    'a hidden file': '隐藏文件',
    'a file {spec} reads, not a hand-in': '{spec} 读取的文件，不是作业',
    'the reference folder': '参考文件夹',
    'a hidden folder': '隐藏文件夹',
    'a folder': '文件夹',
    'is not a regular file (a FIFO, a socket or a device): never opened': '不是普通文件（FIFO、套接字或设备）：不打开',
    'none': '无',
    'unknown suffix {suffix} (a hand-in is {suffixes})': '未知的后缀 {suffix}（作业应是 {suffixes}）',
    'unreadable ({why})': '无法读取（{why}）',
    'a folder in a flat folder of hand-ins (NAME.yaml files)': '平铺的作业文件夹（NAME.yaml 文件）里的子文件夹',
    "a folder inside a student's folder (a hand-in is NAME/TASK.yaml)": '学生文件夹里的子文件夹（作业应是 NAME/TASK.yaml）',
    'a file beside the student folders (one folder per student: NAME/TASK.yaml)': '与学生文件夹并列的文件（每个学生一个文件夹：NAME/TASK.yaml）',
    'a second hand-in for {what}: {kept} is graded': '{what} 的第二份作业：评的是 {kept}',
    '{folder}: no student folders and no hand-ins ({suffixes}) in this folder': '{folder}：这个文件夹里既没有学生文件夹，也没有作业（{suffixes}）',
    '{folder}: cannot list this folder ({why})': '{folder}：无法列出这个文件夹（{why}）',
    '{file}: {reason}': '{file}：{reason}',
    '{path}: the reference cannot be read, so no hand-in is graded against it': '{path}：无法读取参考，因此没有作业按它评分',
    'a reference is a trace tracer saved (tracer run SOLUTION.yaml --json --with-weights), not {what}': '参考应是 tracer 保存的运行记录（tracer run SOLUTION.yaml --json --with-weights），而不是{what}',
    'a spec': 'spec',
    'arrays': '数组',
    "the arrays do not hold the block's output ({stage}): the stages part needs it": '这些数组没有块的输出（{stage}）：“各阶段”一项需要它',
    'lost: {parts}': '失分：{parts}',
    '{kind} violation: {rest}': '{kind}违规：{rest}',
    '{path}: no such folder': '{path}：没有这个文件夹',
    '{folder} is a flat folder of NAME.yaml files, and {n} reference tasks could be meant: give --task, one of {names}': '{folder} 是一个平铺的 NAME.yaml 文件夹，可能对应 {n} 个参考任务：请给出 --task，取 {names} 之一',
    '{folder}: no reference traces (*.json) in this folder': '{folder}：这个文件夹里没有参考追踪（*.json）',
    '--task {task}: no {task}.json in {folder}': '--task {task}：{folder} 里没有 {task}.json',
    'no {name}.yaml handed in': '没有提交 {name}.yaml',
    'no {name}.json in {folder}': '{folder} 里没有 {name}.json',
    '{n} graded: {same} same as the reference, mean score {mean}/{total}': '已评 {n} 份：{same} 份与参考相同，平均分 {mean}/{total}',
    '--json and --csv - both write to stdout: give one, or --csv FILE': '--json 和 --csv - 都写到标准输出：只给一个，或用 --csv FILE',
}

PLURALS: dict[tuple[str, str], str] = {
    ('{n} entry not graded', '{n} entries not graded'): '{n} 项未评',
    ('{folder}: a flat folder of NAME.yaml files, one student each; {n} student', '{folder}: a flat folder of NAME.yaml files, one student each; {n} students'): '{folder}：一个平铺的文件夹，每个 NAME.yaml 是一个学生；{n} 个学生',
    ('{folder}: one folder per student (NAME/TASK.yaml); {n} student', '{folder}: one folder per student (NAME/TASK.yaml); {n} students'): '{folder}：每个学生一个文件夹（NAME/TASK.yaml）；{n} 个学生',
}
