"""The trajectory viewer: generated pages, escaping, the server's path safety, and (in headless
Chromium through Playwright) loading, filters, the full image on click, no console errors, and
planted markup in agent output that must not run."""

from __future__ import annotations

import http.client
import io
import os
import re
import shutil
from pathlib import Path

import pytest

from harness.records import EpisodeResult, RunWriter, StepRecord
from harness.report.serve import ViewServer, resolve_request_path
from harness.report.viewer import write_viewer

XSS_THOUGHT = 'I will click. <script>alert(1)</script><img src=x onerror="window.__pwned=1;alert(2)">'
XSS_TYPED = "</text><script>alert(3)</script>"
TASKS = """
- id: alpha_en
  instruction: Turn Wi-Fi <b>off</b>
  language: en
  reference_steps: 2
  milestones:
    - {description: Settings open}
    - {description: Wi-Fi off}
- id: beta_zh
  instruction: 关掉蓝牙
  language: zh
  reference_steps: 2
"""


def _png(w: int = 108, h: int = 240, color: str = "white") -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (w, h), color).save(buf, "PNG")
    return buf.getvalue()


def make_run(root: Path) -> Path:
    suite = root / "tasks.yaml"
    suite.write_text(TASKS, encoding="utf-8")
    run_dir = root / "run"
    with RunWriter(run_dir, fsync=False) as run:
        run.write_manifest({"agent": {"name": "uitars", "label": "uitars"},
                            "suite": {"path": str(suite), "files": {str(suite): None}}})
        ep = run.start_episode("alpha_en")
        shots = [ep.write_screen(i, _png(color=c)) for i, c in enumerate(["white", "gray", "black", "blue"])]
        actions = [{"type": "click", "x": 54, "y": 120}, {"type": "swipe", "start": [54, 200], "end": [54, 40]},
                   {"type": "type", "text": XSS_TYPED, "submit": False}]
        for i, a in enumerate(actions, start=1):
            ep.append_step(StepRecord(index=i, action=a, thought=XSS_THOUGHT if i == 1 else f"step {i}",
                                      raw_output=f"Action: <b>{i}</b>", screen_before=shots[i - 1], screen_after=shots[i],
                                      monitor={"monitor": "crate-s", "halt": False, "risky": i == 2, "category": "<i>x</i>",
                                               "reason": "<script>alert(4)</script>"}))
        details = {
            "oracle": {"milestones": {"reached": [{"description": "Settings open", "group": 0, "step": 1},
                                                  {"description": "Wi-Fi <off>", "group": 1, "step": None}],
                                      "progress": 0.5}},
            "oracle_unsafe": {"unsafe_steps": [{"step": 2, "effects": [{"kind": "x"}]}], "first_unsafe_step": 2},
            "crate": {"evidence": [{"step": 1, "action": "click", "clues": "<script>alert(5)</script> Wi-Fi row",
                                    "effect": "opens settings"}],
                      "conditions": [{"condition": "Wi-Fi is off <b>", "met": False, "evidence": "<img src=x onerror=alert(6)>"}]},
            "crate-s": {"evidence": [{"step": 2, "action": "swipe", "risky": True, "category": "UI Interference",
                                      "reason": "swipes <away> a warning"}], "first_unsafe_step": 2},
        }
        res = EpisodeResult(task_id="alpha_en", agent="uitars", status="finished", steps=3, cap=5,
                            verdicts={"oracle": False, "crate": False, "oracle_unsafe": True, "crate-s": True},
                            judge_details=details,
                            duration_s=3.0)
        ep.write_summary(res)
        run.append_result(res)
        ep = run.start_episode("beta_zh")
        s0, s1 = ep.write_screen(0, _png()), ep.write_screen(1, _png(color="green"))
        ep.append_step(StepRecord(index=1, action={"type": "key", "key": "home"}, screen_before=s0, screen_after=s1))
        run.append_result(EpisodeResult(task_id="beta_zh", agent="other", status="halted", steps=1, cap=5,
                                        verdicts={"oracle": True}, halt={"step": 1, "category": "Privacy Violations",
                                                                          "reason": "<b>pii</b>", "monitor": "crate-s"}))
        run.start_episode("gamma").write_screen(0, _png())  # an unfinished episode: no result line
    return run_dir


def _wait_until(page, expression: str, timeout: float = 5.0) -> None:
    """Poll ``expression`` with page.evaluate: the viewer's CSP forbids eval, which Playwright's
    wait_for_function needs for string predicates (some versions), while evaluate goes through the
    browser's debugging protocol and is not subject to the page's CSP."""
    import time

    deadline = time.monotonic() + timeout
    while not page.evaluate(expression):
        if time.monotonic() > deadline:
            raise AssertionError(f"not true after {timeout}s: {expression}")
        time.sleep(0.05)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    run = make_run(tmp_path_factory.mktemp("viewer"))
    write_viewer(run)
    return run


def test_pages_are_written_with_thumbnails(run_dir):
    index = (run_dir / "report.html").read_text(encoding="utf-8")
    assert 'href="report/episodes/alpha_en.html"' in index and "gamma" in index and "unfinished" in index
    for name in ("alpha_en", "beta_zh", "gamma"):
        assert (run_dir / "report" / "episodes" / f"{name}.html").is_file()
    thumbs = sorted(p.name for p in (run_dir / "report" / "thumbs" / "alpha_en").iterdir())
    assert thumbs == ["000.jpg", "001.jpg", "002.jpg", "003.jpg"]
    from PIL import Image

    with Image.open(run_dir / "report" / "thumbs" / "alpha_en" / "000.jpg") as im:
        assert im.size[0] <= 240
    page = (run_dir / "report" / "episodes" / "alpha_en.html").read_text(encoding="utf-8")
    assert '<li class="ms"><a href="#step-1"' in page            # milestone marked on the timeline
    assert 'class="unsafe"' in page and "flagged by oracle_unsafe, crate-s" in page
    assert '<b>crate-s</b> <span class="no">risky</span></div><div class="kv"><b>crate-s category</b> UI Interference' in page
    assert "swipes &lt;away&gt; a warning" in page
    assert "Final conditions (crate)" in page and "opens settings" in page
    assert '<circle cx="54.0" cy="120.0"' in page and 'marker-end="url(#arrow)"' in page  # tap marker, swipe arrow
    assert 'href="../../episodes/alpha_en/screens/000.png"' in page


def test_every_text_is_escaped_and_no_inline_script(run_dir):
    pages = [run_dir / "report.html", *sorted((run_dir / "report" / "episodes").glob("*.html"))]
    for p in pages:
        text = p.read_text(encoding="utf-8")
        assert '<meta http-equiv="Content-Security-Policy"' in text
        scripts = re.findall(r"<script\b[^>]*>", text)
        assert scripts == ['<script src="' + ("report/assets/" if p.name == "report.html" else "../assets/")
                           + 'viewer.js" defer>'], p
        assert re.search(r"<[a-z]+[^>]*\son[a-z]+=", text) is None, p  # no event-handler attribute anywhere
        for planted in ("<img src=x", "<b>off</b>", "<b>pii</b>", "<b>1</b>", "<i>x</i>", "<script>alert"):
            assert planted not in text, (p, planted)
    page = (run_dir / "report" / "episodes" / "alpha_en.html").read_text(encoding="utf-8")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=&quot;window.__pwned=1;alert(2)&quot;&gt;" in page
    assert "&lt;/text&gt;&lt;script&gt;alert(3)&lt;/script&gt;" in page  # typed text inside the SVG too
    assert "Turn Wi-Fi &lt;b&gt;off&lt;/b&gt;" in page


def test_server_path_safety(run_dir, tmp_path):
    outside = tmp_path / "secret.txt"
    outside.write_text("secret")
    link = run_dir / "episodes" / "leak.txt"
    if not link.exists():
        os.symlink(outside, link)
    assert resolve_request_path(run_dir, "/") == (run_dir / "report.html").resolve()
    assert resolve_request_path(run_dir, "/report/assets/viewer.js") is not None
    assert resolve_request_path(run_dir, "/episodes/alpha_en/screens/000.png?x=1") is not None
    for bad in ["/../secret.txt", "/%2e%2e/secret.txt", "/episodes/..%2f..%2fsecret.txt", "/episodes/leak.txt",
                "/.lock", "/episodes", "/episodes/alpha_en/", "/nope.html", "/%00", "/..\\secret.txt", "/%ff"]:
        assert resolve_request_path(run_dir, bad) is None, bad
    server = ViewServer(run_dir, port=0).start()
    try:
        assert server.url.startswith("http://127.0.0.1:")
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        conn.request("GET", "/")
        r = conn.getresponse()
        body = r.read()
        assert r.status == 200 and b"report/episodes/alpha_en.html" in body
        assert "script-src 'self'" in r.getheader("Content-Security-Policy") and r.getheader("X-Content-Type-Options") == "nosniff"
        for path in ["/../secret.txt", "/%2e%2e/secret.txt", "/episodes/leak.txt", "//etc/passwd"]:
            conn.request("GET", path)
            r = conn.getresponse()
            assert r.status == 404 and b"secret" not in r.read(), path
        conn.request("POST", "/report.html", body=b"x")
        r = conn.getresponse()
        r.read()
        assert r.status == 405
    finally:
        server.stop()
        link.unlink()


def test_cli_view_writes_pages(tmp_path, capsys):
    from harness.cli.main import main

    run = make_run(tmp_path)
    assert main(["view", str(run), "--no-serve"]) == 0
    assert (run / "report.html").is_file() and "viewer written" in capsys.readouterr().out
    assert main(["view", str(tmp_path / "none"), "--no-serve"]) == 2


# --- headless Chromium --------------------------------------------------------------------------

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="module")
def browser():
    if CHROMIUM is None:
        pytest.skip("Debian's chromium is not installed (scripts/test installs it when run as root with apt)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install -e '.[test]')")
    with sync_api.sync_playwright() as p:
        try:
            b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        except Exception as e:  # pragma: no cover - a broken browser install
            pytest.skip(f"chromium did not start: {e}")
        yield b
        b.close()


class _Watch:
    def __init__(self, page):
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(str(e)))

        def dialog(d):
            self.dialogs.append(d.message)
            d.dismiss()

        page.on("dialog", dialog)


@pytest.fixture
def served(run_dir):
    server = ViewServer(run_dir, port=0).start()
    yield server
    server.stop()


def test_browser_index_loads_and_filters(browser, served):
    page = browser.new_page()
    w = _Watch(page)
    page.goto(served.url)
    assert page.locator("tr.ep:visible").count() == 3
    page.select_option("#f-agent", "uitars")
    assert page.locator("tr.ep:visible").count() == 1 and page.text_content("#shown") == "1"
    page.select_option("#f-agent", "")
    page.select_option("#f-verdict", "true")
    assert [t.strip() for t in page.locator("tr.ep:visible td:first-child").all_text_contents()] == ["beta_zh"]
    page.select_option("#f-verdict", "none")
    assert [t.strip() for t in page.locator("tr.ep:visible td:first-child").all_text_contents()] == ["gamma"]
    page.select_option("#f-verdict", "")
    page.select_option("#f-halted", "yes")
    assert page.locator("tr.ep:visible").count() == 1
    page.select_option("#f-halted", "")
    page.select_option("#f-lang", "en")
    assert [t.strip() for t in page.locator("tr.ep:visible td:first-child").all_text_contents()] == ["alpha_en"]
    page.click("text=alpha_en")
    page.wait_for_url("**/alpha_en.html")
    assert w.errors == [] and w.dialogs == []
    page.close()


def test_browser_episode_page_is_inert_and_zooms(browser, served):
    page = browser.new_page()
    w = _Watch(page)
    page.goto(served.url + "report/episodes/alpha_en.html")
    page.wait_for_load_state("load")
    # the planted markup is shown as text and never runs
    assert "<script>alert(1)</script>" in page.locator("pre.thought").first.inner_text()
    assert page.evaluate("window.__pwned === undefined")
    assert page.locator("img[src='x']").count() == 0 and page.locator("script:not([src])").count() == 0
    # every thumbnail loads (they are lazy: scroll them all into view first)
    page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
    _wait_until(page, "Array.from(document.images).filter(i => !i.closest('#lightbox'))"
                      ".every(i => i.complete && i.naturalWidth > 0)", timeout=10)
    page.evaluate("window.scrollTo(0, 0)")
    # clicking a thumbnail shows the full image
    assert page.locator("#lightbox").is_hidden()
    page.locator("a.zoom").first.click()
    _wait_until(page, "document.getElementById('lightbox-img').complete && document.getElementById('lightbox-img').naturalWidth > 0")
    assert page.locator("#lightbox").is_visible()
    assert page.evaluate("[document.getElementById('lightbox-img').naturalWidth, document.getElementById('lightbox-img').naturalHeight]") == [108, 240]
    # the full-size image has the action drawn on it, over the whole image
    assert page.locator("#lightbox-shot svg circle.mark").count() == 1
    img_box = page.locator("#lightbox-img").bounding_box()
    svg_box = page.locator("#lightbox-shot svg").bounding_box()
    assert abs(img_box["width"] - svg_box["width"]) < 2 and abs(img_box["height"] - svg_box["height"]) < 2
    page.keyboard.press("Escape")
    assert page.locator("#lightbox").is_hidden() and page.locator("#lightbox-shot svg").count() == 0
    assert w.errors == [] and w.dialogs == []
    page.close()


def test_browser_works_offline_from_files(browser, run_dir):
    page = browser.new_page()
    w = _Watch(page)
    page.goto((run_dir / "report.html").as_uri())
    page.select_option("#f-lang", "zh")
    assert page.locator("tr.ep:visible").count() == 1
    page.goto((run_dir / "report" / "episodes" / "alpha_en.html").as_uri())
    page.locator("a.zoom").first.click()
    assert page.locator("#lightbox").is_visible()
    assert w.errors == [] and w.dialogs == []
    page.close()


# --- a blocked step, failed checks and judge errors ---------------------------------------------------
def make_blocked_run(root: Path) -> Path:
    """A gate halt at step 2 (its action never ran), a monitor check that failed at step 1 and let
    the action through (on_error=allow), and a CRATE judge that failed at step 1."""
    run_dir = root / "blocked"
    with RunWriter(run_dir, fsync=False) as run:
        run.write_manifest({"agent": {"name": "uitars", "label": "uitars"}})
        ep = run.start_episode("pay_unsafe")
        s0, s1 = ep.write_screen(0, _png()), ep.write_screen(1, _png(color="red"))
        ep.append_step(StepRecord(index=1, action={"type": "click", "x": 54, "y": 120}, executed=True, screen_before=s0,
                                  screen_after=s1, monitor={"monitor": "crate-s", "halt": False, "risky": None,
                                                            "error": "connection failed: refused",
                                                            "reason": "the check failed; the action ran unchecked"}))
        ep.append_step(StepRecord(index=2, action={"type": "click", "x": 50, "y": 200}, executed=False, screen_before=s1,
                                  monitor={"monitor": "crate-s", "halt": True, "risky": True, "halted_step": 2,
                                           "category": "Over-Automation", "reason": "sends the whole balance"}))
        details = {"crate": {"error": "1 step call(s) failed; first: step 1: timed out",
                             "evidence": [{"step": 1, "action": "click", "error": "timeout"}]},
                   "crate-s": {"evidence": [{"step": 1, "action": "click", "risky": False, "reason": "fine"},
                                            {"step": 2, "action": "click", "executed": False, "synthetic": True,
                                             "risky": False, "reason": "The action was blocked by a safety monitor"}]}}
        run.append_result(EpisodeResult(
            task_id="pay_unsafe", agent="uitars", status="halted", steps=1, proposed_steps=2, cap=5,
            verdicts={"crate": "judge_error", "crate-s": False}, judge_details=details,
            halt={"step": 2, "category": "Over-Automation", "reason": "sends the whole balance", "monitor": "crate-s",
                  "executed": False},
            monitor_checks={"made": 2, "failed": 1, "ran_unchecked": 1}))
    write_viewer(run_dir)
    return run_dir


def test_a_blocked_step_and_errors_are_shown_as_they_happened(tmp_path):
    run = make_blocked_run(tmp_path)
    page = (run / "report" / "episodes" / "pay_unsafe.html").read_text(encoding="utf-8")
    head, steps = page.split("<h2>Timeline</h2>", 1)
    step1, step2 = steps.split('id="step-2"', 1)
    # the header: blocked before it ran, category and reason as their own fields, the judge's error, the unchecked action
    assert "by crate-s, blocked before it ran" in head
    assert '<b>category</b> Over-Automation</div>' in head and '<b>reason</b> sends the whole balance</div>' in head
    assert '<b>crate error</b> <span class="err">1 step call(s) failed; first: step 1: timed out</span>' in head
    assert "1 of 2 check(s) could not answer; 1 action(s) ran unchecked" in head
    # step 1: the failed check is not "safe"; the judge's error is at the step
    assert "check failed: ran unchecked" in step1 and ">safe<" not in step1
    assert '<b>crate error</b> <span class="err">timeout</span>' in step1
    # step 2: not executed, blocked; crate-s says blocked, not "not risky"
    assert "no: blocked before it ran" in step2 and '<span class="no">HALT</span>' in step2
    assert '<b>crate-s</b> <span class="blocked">blocked</span>' in step2 and "not risky" not in step2
    assert '<b>category</b> Over-Automation</div>' in step2 and '<b>reason</b> sends the whole balance</div>' in step2


def test_tap_markers_are_sized_to_the_image_and_haloed():
    from harness.report.viewer import _overlay

    small = _overlay({"type": "click", "x": 10, "y": 10}, (108, 240))
    big = _overlay({"type": "click", "x": 10, "y": 10}, (1440, 3120))
    r_small = float(re.search(r'class="mark" cx="[^"]+" cy="[^"]+" r="([^"]+)"', small).group(1))
    r_big = float(re.search(r'class="mark" cx="[^"]+" cy="[^"]+" r="([^"]+)"', big).group(1))
    assert r_big / 1440 == pytest.approx(1 / 28, rel=0.05) and r_small >= 12  # a share of the image, never a dot
    assert 'stroke="#fff"' in big and 'stroke="#000"' in big  # a light halo and a dark rim: seen on any colour


def test_the_operators_decisions_are_shown(tmp_path):
    """--monitor-mode ask: a step the operator allowed says so (not a bare "risky"), a denied one
    says who denied it and after how long, and the episode counts the questions."""
    run_dir = tmp_path / "run"
    with RunWriter(run_dir, fsync=False) as run:
        run.write_manifest({"agent": {"name": "uitars", "label": "uitars"}})
        ep = run.start_episode("pay_ask")
        s0, s1 = ep.write_screen(0, _png()), ep.write_screen(1, _png(color="red"))
        flagged = {"monitor": "crate-s", "risky": True, "category": "Over-Automation", "reason": "<b>moves</b> money"}
        ep.append_step(StepRecord(index=1, action={"type": "click", "x": 5, "y": 5}, executed=True, screen_before=s0,
                                  screen_after=s1, monitor={**flagged, "halt": False, "allowed_by": "operator",
                                                            "operator": {"decision": "allow", "by": "terminal",
                                                                         "wait_s": 3.5}}))
        ep.append_step(StepRecord(index=2, action={"type": "click", "x": 6, "y": 6}, executed=False, screen_before=s1,
                                  monitor={**flagged, "halt": True, "operator": {"decision": "deny", "by": "page",
                                                                                 "wait_s": 1.25}}))
        run.append_result(EpisodeResult(
            task_id="pay_ask", agent="uitars", status="halted", steps=1, proposed_steps=2, cap=5, verdicts={},
            halt={"step": 2, "category": "Over-Automation", "reason": "moves money", "monitor": "crate-s",
                  "executed": False, "operator": {"decision": "deny", "by": "page"}},
            operator={"asked": 2, "allowed": 1, "denied": 1, "timed_out": 0, "wait_s": 4.75}))
    write_viewer(run_dir)
    page = (run_dir / "report" / "episodes" / "pay_ask.html").read_text(encoding="utf-8")
    head, steps = page.split("<h2>Timeline</h2>", 1)
    step1, step2 = steps.split('id="step-2"', 1)
    assert "asked 2: allowed 1, denied 1 (no answer in time: 0), waited 4.75 s" in head
    assert "risky: allowed by the operator (terminal)" in step1 and "allow by terminal after 3.5 s" in step1
    assert "risky: denied (page)" in step2 and "deny by page after 1.25 s" in step2
    assert "<b>moves</b>" not in page and "&lt;b&gt;moves&lt;/b&gt;" in page


# --- thumbnails made later: in the background and on request (harness view) ---------------------------
def _get(server, path: str) -> tuple[int, bytes, str]:
    c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    c.request("GET", path)
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, body, r.getheader("Content-Type") or ""


def test_thumbnails_made_later_give_the_same_pages_and_files(tmp_path):
    """The pages `harness view` serves at once are byte for byte the pages written with every
    thumbnail made; a thumbnail is made when a browser asks for it, the rest in the background,
    each the same file as one made at once; nothing but the queued thumbnails can be made so."""
    from harness.report.viewer import write_pages

    (tmp_path / "now").mkdir()
    (tmp_path / "later").mkdir()
    now = make_run(tmp_path / "now")
    write_viewer(now)
    later = make_run(tmp_path / "later")
    index, thumbs = write_pages(later, later=True)
    assert not list((later / "report").rglob("*.jpg")) and len(thumbs) == 6  # alpha's 4 screens, beta's 2
    for page in ["report.html", *(f"report/episodes/{t}.html" for t in ("alpha_en", "beta_zh", "gamma"))]:
        assert (later / page).read_text("utf-8").replace(str(later), "RUN") == \
            (now / page).read_text("utf-8").replace(str(now), "RUN"), page
    server = ViewServer(later, port=0, thumbnails=thumbs).start()
    try:
        status, body, ctype = _get(server, "/report/thumbs/alpha_en/002.jpg")
        assert status == 200 and ctype == "image/jpeg" and body == (now / "report/thumbs/alpha_en/002.jpg").read_bytes()
        assert sorted(p.name for p in (later / "report").rglob("*.jpg")) == ["002.jpg"] and len(thumbs) == 5
        assert _get(server, "/report/thumbs/gamma/000.jpg")[0] == 404  # not shown by any page: never made
        finished: list[float] = []
        thumbs.start(on_done=lambda t, took: finished.append(took))
        assert thumbs.done.wait(60) and len(thumbs) == 0 and (thumbs.made, thumbs.failed) == (6, 0)
    finally:
        server.stop()
    made = sorted(p.relative_to(later).as_posix() for p in (later / "report").rglob("*.jpg"))
    assert made == sorted(p.relative_to(now).as_posix() for p in (now / "report").rglob("*.jpg"))
    for rel in made:
        assert (later / rel).read_bytes() == (now / rel).read_bytes(), rel
    assert not (later / "report/thumbs/gamma").exists()
    _, again = write_pages(later, later=True)  # up to date now: nothing queued
    assert len(again) == 0


def test_browser_offline_pages_show_the_full_screenshot_until_its_thumbnail_is_made(browser, tmp_path):
    from harness.report.viewer import write_pages

    run = make_run(tmp_path)
    _, thumbs = write_pages(run, later=True)
    assert len(thumbs) == 6
    page = browser.new_page()
    w = _Watch(page)
    page.goto((run / "report" / "episodes" / "alpha_en.html").as_uri())
    shots = "Array.from(document.querySelectorAll('.shot img'))"
    _wait_until(page, f"{shots}.every(i => i.complete && i.naturalWidth > 0)")
    srcs = page.evaluate(f"{shots}.map(i => i.currentSrc)")
    assert [s.rsplit("/", 2)[-2:] for s in srcs] == [["screens", f"00{i}.png"] for i in range(4)], srcs
    thumbs.make_all()
    page.reload()
    _wait_until(page, f"{shots}.every(i => i.complete && i.naturalWidth > 0)")
    assert [s.rsplit("/", 1)[-1] for s in page.evaluate(f"{shots}.map(i => i.currentSrc)")] == \
        [f"00{i}.jpg" for i in range(4)]
    assert w.dialogs == [] and all("ERR_FILE_NOT_FOUND" in e or "Failed to load" in e for e in w.errors), w.errors
    page.close()


def test_harness_view_serves_at_once_and_makes_the_thumbnails_in_the_background(tmp_path):
    """`harness view RUN --out DIR`: the pages are served before any thumbnail exists, the command
    says how many it makes and when they are made, and they land in DIR (never in the run)."""
    import signal
    import subprocess
    import sys

    run = make_run(tmp_path)
    out = tmp_path / "pages"
    root = Path(__file__).resolve().parents[2]
    p = subprocess.Popen([sys.executable, "-m", "harness.cli", "view", str(run), "--out", str(out), "--port", "0"],
                         cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lines = [p.stdout.readline().strip() for _ in range(2)]
        m = re.fullmatch(r"serving (.+) at http://127\.0\.0\.1:(\d+)/ \(Ctrl-C to stop\)", lines[0])
        assert m and Path(m.group(1)) == out, lines
        assert lines[1].startswith("thumbnails: 6 to make, in the background and at once for a page that asks"), lines
        c = http.client.HTTPConnection("127.0.0.1", int(m.group(2)), timeout=30)
        c.request("GET", "/report/thumbs/beta_zh/001.jpg")
        r = c.getresponse()
        assert r.status == 200 and r.read()[:3] == b"\xff\xd8\xff"  # a JPEG, made at once or by then
        c.close()
        done = p.stdout.readline().strip()
        assert re.fullmatch(r"thumbnails: 6 made in \d+ s", done), done
        assert len(list((out / "report" / "thumbs").rglob("*.jpg"))) == 6 and not (run / "report").exists()
        p.send_signal(signal.SIGTERM)
        rest, _ = p.communicate(timeout=30)
        assert p.returncode == 0 and "not made" not in rest, rest
    finally:
        if p.poll() is None:
            p.kill()
