"""The Chinese of what tracer/page/ says, keyed by its English: the catalogue of this package's messages
(MESSAGES), plural forms (PLURALS) and UI words (UI), kept as tracer/zh.py keeps the whole (its docstring says how).
Nothing here imports anything."""

MESSAGES: dict[str, str] = {
    '--page-budget {value}: expected a positive number of megabytes, e.g. 20': '--page-budget {value}：应为正的兆字节数，例如 20',
    '--page-budget {budget}: the page needs at least {size} MB even with every large stage summarised; give --page-budget {size} or more': '--page-budget {budget}：即使概括了每个大的阶段，页面也至少需要 {size} MB；请给出 --page-budget {size} 或更大',
    "give the page's file: tracer page SPEC -o FILE": '请给出页面文件：tracer page SPEC -o FILE',
}
