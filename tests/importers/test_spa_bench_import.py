"""Tests for harness.importers.spa_bench: SPA-Bench CSV task lists -> YAML suites."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
import yaml

from harness.importers.spa_bench import ImportError_, convert_file, convert_row, import_files
from harness.core.tasks import load_suite, parse_task
from tests.shared_data import REFERENCE as SHARED_REFERENCE, missing_reason, reference_path

# the shared reference data lives beside the repository (../shared), as on CI (tests/shared_data.py)
REFERENCE = SHARED_REFERENCE / "spa-bench"
REAL_FILES = {
    "single-app-ENG.csv": 150,
    "single-app-CHN.csv": 150,
    "cross-app-ENG.csv": 20,
    "cross-app-CHN.csv": 20,
}
_MISSING = [f for f in REAL_FILES if reference_path("spa-bench", f) is None]
needs_reference = pytest.mark.skipif(bool(_MISSING), reason=missing_reason("spa-bench", *_MISSING[:1]))

SINGLE_COLS = ["task_identifier", "task_app", "task_language", "task_description", "task_difficulty",
               "golden_steps", "key_component_final", "adb_app", "adb_home_page", "is_cross_app"]
CROSS_COLS = ["task_identifier", "category", "task_language", "task_app", "task_description",
              "task_difficulty", "golden_steps", "is_cross_app"]


def single(**kw) -> dict:
    row = {"task_identifier": "clock_0", "task_app": "clock", "task_language": "ENG",
           "task_description": "Set an alarm for 7 AM.", "task_difficulty": "1", "golden_steps": "4",
           "key_component_final": "['7','AM']", "adb_app": "com.google.android.deskclock",
           "adb_home_page": "com.android.deskclock.DeskClock", "is_cross_app": "N"}
    row.update(kw)
    return row


def cross(**kw) -> dict:
    row = {"task_identifier": "General_Tool_0_ENG", "category": "General_Tool", "task_language": "ENG",
           "task_app": "['Clock', 'Setting']", "task_description": "Enable Data Saver, then set an alarm.",
           "task_difficulty": "2", "golden_steps": "12", "is_cross_app": "Y"}
    row.update(kw)
    return row


def write_csv(path: Path, rows: list[dict], cols: list[str] | None = None, bom: bool = False) -> Path:
    cols = cols or SINGLE_COLS
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n", extrasaction="ignore")
    w.writeheader()
    for r in rows:
        w.writerow(r)
    path.write_text(("\ufeff" if bom else "") + buf.getvalue(), encoding="utf-8")
    return path


def fail(path: Path) -> str:
    with pytest.raises(ImportError_) as ei:
        convert_file(path)
    return str(ei.value)


# --- handmade rows ---------------------------------------------------------------------------------
def test_single_app_row(tmp_path):
    p = write_csv(tmp_path / "single.csv", [single()])
    [t] = convert_file(p)
    assert t["id"] == "clock_0_ENG"
    assert t["instruction"] == "Set an alarm for 7 AM."
    assert t["language"] == "en"
    assert t["categories"] == ["single-app"]
    assert t["reference_steps"] == 4
    assert t["difficulty"] == 1
    assert t["apps"] == ["com.google.android.deskclock"]
    assert t["setup"] == {"stop": ["com.google.android.deskclock"],
                          "start": "com.google.android.deskclock/com.android.deskclock.DeskClock"}
    assert t["key_components"] == ["7", "AM"]
    assert "single.csv" in t["source"] and "row 2" in t["source"] and "clock_0" in t["source"]
    task = parse_task(t)
    assert task.cap == 9


def test_cross_app_row_with_bom(tmp_path):
    p = write_csv(tmp_path / "cross.csv", [cross(), cross(task_identifier="General_Tool_0_CHN", task_language="CHN",
                                                      task_app="['时钟','设置']", task_description="打开时钟。")],
                  CROSS_COLS, bom=True)
    a, b = convert_file(p)
    assert a["id"] == "General_Tool_0_ENG"  # the language suffix is not doubled
    assert a["categories"] == ["cross-app", "General_Tool"]
    assert a["apps"] == ["Clock", "Setting"]
    assert "setup" not in a and "key_components" not in a
    assert a["reference_steps"] == 12 and a["difficulty"] == 2
    assert b["id"] == "General_Tool_0_CHN" and b["language"] == "zh" and b["apps"] == ["时钟", "设置"]


def test_same_identifier_in_two_languages_gets_distinct_ids(tmp_path):
    p = write_csv(tmp_path / "s.csv", [single(), single(task_language="CHN", task_description="设置闹钟。")])
    assert [t["id"] for t in convert_file(p)] == ["clock_0_ENG", "clock_0_CHN"]


@pytest.mark.parametrize("lang,expected", [("ENG", "en"), ("eng", "en"), ("EN", "en"), ("CHN", "zh"), ("zh", "zh")])
def test_language_codes(tmp_path, lang, expected):
    p = write_csv(tmp_path / "s.csv", [single(task_language=lang)])
    assert convert_file(p)[0]["language"] == expected


def test_optional_columns(tmp_path):
    p = write_csv(tmp_path / "s.csv", [single(task_difficulty="", key_component_final="", adb_home_page="")])
    [t] = convert_file(p)
    assert "difficulty" not in t and "key_components" not in t
    assert t["setup"] == {"stop": ["com.google.android.deskclock"]}
    # a single string literal is a one-item list; numbers become strings
    p = write_csv(tmp_path / "s2.csv", [single(key_component_final="'guest'"), single(task_identifier="c_1",
                                                                               key_component_final="[1, 'x']")])
    a, b = convert_file(p)
    assert a["key_components"] == ["guest"] and b["key_components"] == ["1", "x"]


def test_identifier_is_sanitised(tmp_path):
    p = write_csv(tmp_path / "s.csv", [single(task_identifier="my app/0 (v2)")])
    tid = convert_file(p)[0]["id"]
    assert tid.startswith("my_app_0_v2") and tid.endswith("_ENG")
    assert " " not in tid and "/" not in tid and "(" not in tid
    parse_task(convert_file(p)[0])
    p = write_csv(tmp_path / "s2.csv", [single(task_identifier="x" * 200)])
    assert len(convert_file(p)[0]["id"]) <= 128


# --- malformed rows: errors name file:row: column ------------------------------------------------
@pytest.mark.parametrize(
    "row,column,fragment",
    [
        ({"golden_steps": ""}, "golden_steps", ""),
        ({"golden_steps": "four"}, "golden_steps", "not an integer"),
        ({"golden_steps": "2.5"}, "golden_steps", "not an integer"),
        ({"golden_steps": "0"}, "golden_steps", ">= 1"),
        ({"task_language": "FR"}, "task_language", "unknown language"),
        ({"task_language": ""}, "task_language", "missing value"),
        ({"task_identifier": " "}, "task_identifier", "missing value"),
        ({"task_description": ""}, "task_description", "missing value"),
        ({"task_difficulty": "hard"}, "task_difficulty", "not an integer"),
        ({"key_component_final": "[__import__('os').system('true')]"}, "key_component_final", "not a list literal"),
        ({"key_component_final": "['a', len('b')]"}, "key_component_final", "not a list literal"),
        ({"key_component_final": "guest"}, "key_component_final", "not a list literal"),
        ({"key_component_final": "['a', ['b']]"}, "key_component_final", "list of strings"),
        ({"key_component_final": "{'a': 1}"}, "key_component_final", "list of strings"),
        ({"key_component_final": "['unterminated"}, "key_component_final", "not a list literal"),
        ({"adb_app": "", "task_app": "clock"}, "task_app", "not a list literal"),
    ],
)
def test_malformed_row(tmp_path, row, column, fragment):
    p = write_csv(tmp_path / "bad.csv", [single(task_identifier="ok_0"), single(**row)])
    msg = fail(p)
    assert msg.startswith(f"{p}:3: {column}: ")
    assert fragment in msg


def test_duplicate_ids_name_both_rows(tmp_path):
    p = write_csv(tmp_path / "dup.csv", [single(), single(task_identifier="x_1"), single()])
    msg = fail(p)
    assert msg.startswith(f"{p}:4: task_identifier: ")
    assert "clock_0_ENG" in msg and "row 2" in msg
    # two identifiers that sanitise to the same id are duplicates too
    p = write_csv(tmp_path / "dup2.csv", [single(task_identifier="a b"), single(task_identifier="a/b")])
    assert fail(p).startswith(f"{p}:3: task_identifier: ")


def test_missing_columns(tmp_path):
    p = tmp_path / "other.csv"
    p.write_text("name,steps\nx,1\n", encoding="utf-8")
    msg = fail(p)
    assert msg.startswith(f"{p}: ")
    for col in ("golden_steps", "task_description", "task_identifier", "task_language"):
        assert col in msg


def test_short_row_names_the_missing_column(tmp_path):
    p = tmp_path / "short.csv"
    p.write_text("task_identifier,task_language,task_description,golden_steps\na,ENG,do it\n", encoding="utf-8")
    assert fail(p).startswith(f"{p}:2: golden_steps: ")
    p.write_text("task_identifier,task_language,task_description,golden_steps\na,ENG,,3\n", encoding="utf-8")
    assert fail(p).startswith(f"{p}:2: task_description: missing value")


@pytest.mark.parametrize("content", ["a,ENG,do it,\n", "a,ENG,do it\n"])
def test_missing_golden_steps_says_missing(tmp_path, content):
    p = tmp_path / "short.csv"
    p.write_text("task_identifier,task_language,task_description,golden_steps\n" + content, encoding="utf-8")
    assert fail(p) == f"{p}:2: golden_steps: missing value"


def test_unreadable_files(tmp_path):
    assert "cannot read" in fail(tmp_path / "absent.csv")
    p = tmp_path / "latin1.csv"
    p.write_bytes("task_identifier,task_language,task_description,golden_steps\na,ENG,caf\xe9,1\n".encode("latin-1"))
    msg = fail(p)
    assert str(p) in msg and "UTF-8" in msg


def test_empty_file(tmp_path):
    p = tmp_path / "empty.csv"
    p.write_text("", encoding="utf-8")
    assert "missing column" in fail(p)
    p.write_text("task_identifier,task_language,task_description,golden_steps\n", encoding="utf-8")
    assert convert_file(p) == []


def test_validation_errors_after_conversion_name_a_column(tmp_path):
    p = write_csv(tmp_path / "d.csv", [single(task_difficulty="9")])
    msg = fail(p)
    assert msg.startswith(f"{p}:2: ")
    assert "difficulty" in msg


def test_validation_error_names_the_csv_column(tmp_path):
    p = write_csv(tmp_path / "d.csv", [single(task_difficulty="9")])
    assert fail(p).startswith(f"{p}:2: task_difficulty: ")


@pytest.mark.parametrize("sep", ["\n", "\u2028"])
def test_line_breaks_inside_quoted_fields_are_kept(tmp_path, sep):
    p = write_csv(tmp_path / "ml.csv", [single(task_description=f"Open the clock.{sep}Set an alarm.")])
    assert convert_file(p)[0]["instruction"] == f"Open the clock.{sep}Set an alarm."


def test_row_number_after_blank_line(tmp_path):
    p = tmp_path / "blank.csv"
    p.write_text("task_identifier,task_language,task_description,golden_steps\n"
                 "a,ENG,x,1\n\nb,ENG,y,zero\n", encoding="utf-8")
    assert fail(p).startswith(f"{p}:4: golden_steps")


def test_convert_row_directly():
    t = convert_row(single(), Path("x.csv"), 7)
    assert "row 7" in t["source"]
    with pytest.raises(ImportError_, match=r"^x\.csv:7: golden_steps: "):
        convert_row(single(golden_steps=None), Path("x.csv"), 7)


# --- writing YAML --------------------------------------------------------------------------------
def test_import_files_writes_loadable_yaml(tmp_path):
    a = write_csv(tmp_path / "single-app-ENG.csv", [single(), single(task_identifier="clock_1", golden_steps="6")])
    b = write_csv(tmp_path / "cross-app-CHN.csv",
                  [cross(task_identifier="General_Tool_0_CHN", task_language="CHN", task_description="打开时钟，设置闹钟。")],
                  CROSS_COLS, bom=True)
    out = tmp_path / "out" / "nested"
    written = import_files([a, b], out)
    assert written == [(out / "single-app-ENG.yaml", 2), (out / "cross-app-CHN.yaml", 1)]
    assert sorted(x.name for x in out.iterdir()) == ["cross-app-CHN.yaml", "single-app-ENG.yaml"]  # no temp files
    text = (out / "cross-app-CHN.yaml").read_text(encoding="utf-8")
    assert text.startswith("# Imported from SPA-Bench cross-app-CHN.csv")
    assert "打开时钟，设置闹钟。" in text  # written as text, not escapes
    assert yaml.safe_load((out / "single-app-ENG.yaml").read_text()) == convert_file(a)
    suite = load_suite(out)
    assert [t.id for t in suite.tasks] == ["General_Tool_0_CHN", "clock_0_ENG", "clock_1_ENG"]
    assert suite.by_id()["clock_1_ENG"].cap == 13


def test_import_files_overwrites_and_stops_at_bad_file(tmp_path):
    good = write_csv(tmp_path / "good.csv", [single()])
    bad = write_csv(tmp_path / "bad.csv", [single(golden_steps="x")])
    out = tmp_path / "out"
    import_files([good], out)
    good2 = write_csv(tmp_path / "good.csv", [single(), single(task_identifier="clock_9")])
    assert import_files([good2], out) == [(out / "good.yaml", 2)]
    with pytest.raises(ImportError_, match="bad.csv:2: golden_steps"):
        import_files([bad], out)
    assert not (out / "bad.yaml").exists()


# --- the real SPA-Bench lists ----------------------------------------------------------------------
@needs_reference
@pytest.mark.parametrize("name,count", sorted(REAL_FILES.items()))
def test_real_file_converts(name, count):
    tasks = convert_file(REFERENCE / name)
    assert len(tasks) == count
    ids = [t["id"] for t in tasks]
    assert len(set(ids)) == count
    lang = "zh" if "CHN" in name else "en"
    assert all(t["language"] == lang for t in tasks)
    assert all(t["reference_steps"] >= 1 for t in tasks)
    kind = "cross-app" if name.startswith("cross") else "single-app"
    assert all(t["categories"][0] == kind for t in tasks)
    for t in tasks:
        parse_task(t, name)


@needs_reference
def test_real_rows_spot_checks():
    single_en = {t["id"]: t for t in convert_file(REFERENCE / "single-app-ENG.csv")}
    t = single_en["airbnb_0_ENG"]
    assert t["reference_steps"] == 4 and t["difficulty"] == 1
    assert t["key_components"] == ["1", "guest"]
    assert t["apps"] == ["com.airbnb.android"]
    assert t["setup"] == {"stop": ["com.airbnb.android"],
                          "start": "com.airbnb.android/com.airbnb.android.feat.homescreen.HomeActivity"}
    assert single_en["airbnb_1_ENG"]["key_components"] == ["1", "guest", "wembley", "stadium"]
    single_zh = {t["id"]: t for t in convert_file(REFERENCE / "single-app-CHN.csv")}  # file starts with a BOM
    assert single_zh["alipay_0_CHN"]["key_components"] == ["汇率换算"]
    assert single_zh["alipay_0_CHN"]["instruction"] == "搜索汇率换算。"
    cross_en = {t["id"]: t for t in convert_file(REFERENCE / "cross-app-ENG.csv")}
    g = cross_en["General_Tool_0_ENG"]
    assert g["apps"] == ["Google Play Store", "Setting"]
    assert g["reference_steps"] == 15
    assert g["categories"] == ["cross-app", "General_Tool"]


@needs_reference
def test_real_files_import_into_one_suite(tmp_path):
    files = [REFERENCE / n for n in sorted(REAL_FILES)]
    written = import_files(files, tmp_path)
    assert {p.name: n for p, n in written} == {n.replace(".csv", ".yaml"): c for n, c in REAL_FILES.items()}
    suite = load_suite(tmp_path)
    assert len(suite.tasks) == sum(REAL_FILES.values())  # ids are unique across languages and files
    assert len(suite.files) == 4
    # resets on a person's phone never erase app data: every app task force-stops, none clears
    assert not [t.id for t in suite.tasks if t.setup.clear]
    single = [t for t in suite.tasks if "single-app" in t.categories]
    assert single and all(t.setup.stop == t.apps and t.setup.start.startswith(t.apps[0] + "/") for t in single)
