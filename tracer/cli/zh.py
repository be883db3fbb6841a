"""The Chinese of what tracer/cli/ says, keyed by its English: the catalogue of this package's messages
(MESSAGES), plural forms (PLURALS) and UI words (UI), kept as tracer/zh.py keeps the whole (its docstring says how).
Nothing here imports anything."""

UI: dict[str, str] = {
    'tracer: wrote {path}': 'tracer: 已写入 {path}',
    ' ({size}; budget {budget})': '（{size}；预算 {budget}）',
}

MESSAGES: dict[str, str] = {
    'this is a bug in tracer; please report it with the spec and the command you ran (set TRACER_DEBUG=1 to see the traceback)': '这是 tracer 的缺陷；请报告它，并附上 spec 和所运行的命令（设置 TRACER_DEBUG=1 可看到调用栈）',
    '--svg and --html export the table the terminal shows; they do not combine with --format {form}': '--svg 和 --html 导出终端显示的表；不能与 --format {form} 同用',
    'interrupted': '已中断',
    'terminated': '已终止',
}

PLURALS: dict[tuple[str, str], str] = {
    ('{n} array summarised to stay within the budget (the page says what was left out)', '{n} arrays summarised to stay within the budget (the page says what was left out)'): '为不超出预算概括了 {n} 个数组（页面上写明了省去的内容）',
}
