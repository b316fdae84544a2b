"""``junit``: JUnit XML, one test suite per file. JUnit has no severity of its own: each test
case carries a ``severity`` property (error or warning, after ``warnings-as-errors``), and a
warning's failure text starts with ``[warning]``, as in the text output."""

from __future__ import annotations

from amplint.report import Message, Summary



def format_junit(messages: list[Message], summary: Summary) -> str:
    import xml.etree.ElementTree as ET

    suites = ET.Element("testsuites", name="amplint", tests=str(max(len(messages), 1)), failures=str(len(messages)), errors="0")
    if not messages:
        suite = ET.SubElement(suites, "testsuite", name="amplint", tests="1", failures="0", errors="0")
        ET.SubElement(suite, "testcase", name="No errors found", classname="amplint")
    by_path: dict[str, list[Message]] = {}
    for m in messages:
        by_path.setdefault(m.path, []).append(m)
    for path, ms in by_path.items():
        suite = ET.SubElement(suites, "testsuite", name=path, tests=str(len(ms)), failures=str(len(ms)), errors="0")
        for m in ms:
            where = f"cell {m.cell}, line {m.row}" if m.cell is not None else f"line {m.row}"
            case = ET.SubElement(
                suite, "testcase", name=f"org.amplint.{m.code}", classname=path, file=path, line=str(m.row), column=str(m.col + 1)
            )
            props = ET.SubElement(case, "properties")
            ET.SubElement(props, "property", name="severity", value=m.severity)
            marker = "[warning] " if m.severity == "warning" else ""
            failure = ET.SubElement(case, "failure", message=marker + m.message, type=m.code)
            failure.text = f"{where}, col {m.col + 1}, {marker}{m.message}"
    ET.indent(suites, space="    ")
    body = ET.tostring(suites, encoding="unicode")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + body + "\n"
