#!/usr/bin/env python3
"""Adds up the JUnit XML reports of lit and GoogleTest in a folder and prints
'N passed, N failed' (skips too, when any). Exits 1 when a test failed or
when no test ran."""
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

passed = failed = skipped = 0
for report in sorted(Path(sys.argv[1]).glob("*.xml")):
    for case in ET.parse(report).getroot().iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            failed += 1
        elif case.find("skipped") is not None:
            skipped += 1
        else:
            passed += 1

line = f"{passed} passed, {failed} failed"
if skipped:
    line += f", {skipped} skipped"
print("tests: " + line)
sys.exit(1 if failed or passed == 0 else 0)
