"""The page at / in a real headless Chromium (Debian's chromium and chromium-driver, driven by
Selenium; .ci/run installs them): type two lines, submit, and read back what the page rendered
for two models side by side — each line's translation, its n-best rows with their scores, the
alignment heatmap — against what /translate answers; then a language model beside a translation
model. A screenshot is kept (in $AIAYN_ARTIFACTS where set, else the test's folder)."""

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.builder.serve.server import Server, make_runs

CHROMIUM, DRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
pytestmark = [
    pytest.mark.slow,  # a browser and a server started: the slow tier
    pytest.mark.skipif(
        not (CHROMIUM.exists() and DRIVER.exists()), reason="needs Debian's chromium and chromium-driver (.ci/run installs them)"
    ),
]
LINES = ["she sold eight apples", "the dog"]
WAIT = 60  # seconds the page may take to answer


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("page")
    runs = make_runs(root)
    one = Server(f"base={runs['base']}", f"variant={runs['variant']}", f"lm={runs['lm']}", log=root / "serve.log")
    yield one
    assert one.stop() == 0


@pytest.fixture
def browser(tmp_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-sync",
                 "--disable-background-networking", "--disable-component-update", "--disable-dev-shm-usage",
                 "--window-size=1400,1000", f"--user-data-dir={tmp_path / 'profile'}"):  # fmt: skip
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(str(DRIVER)), options=options)
    yield driver
    driver.quit()


def submit(browser, server, lines, left, right, **settings):
    """Open the page, type `lines`, choose the models, set the inputs named in `settings` (id: value; a
    checkbox's True clicks it), submit, and wait until both panels are done."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.select import Select
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(f"http://127.0.0.1:{server.port}/")
    WebDriverWait(browser, WAIT).until(lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "1")
    browser.find_element(By.ID, "input").send_keys("\n".join(lines))
    Select(browser.find_element(By.ID, "left")).select_by_value(left)
    Select(browser.find_element(By.ID, "right")).select_by_value(right)
    for name, value in settings.items():
        field = browser.find_element(By.ID, name)
        if value is True:
            field.click()
        else:
            field.clear()
            field.send_keys(str(value))
    browser.find_element(By.ID, "submit").click()
    if not lines:
        return
    for side in ("left", "right"):
        WebDriverWait(browser, WAIT).until(lambda d: d.find_element(By.ID, f"panel-{side}").get_attribute("data-done") == "1")


def rendered(browser, side):
    from selenium.webdriver.common.by import By

    panel = browser.find_element(By.ID, f"panel-{side}")
    translations = [e.text for e in panel.find_elements(By.CLASS_NAME, "translation")]
    rows = [[td.text for td in row.find_elements(By.TAG_NAME, "td")] for row in panel.find_elements(By.CLASS_NAME, "nbest-row")]
    return panel, translations, rows


def test_two_models_side_by_side_as_the_api_answers(server, browser, tmp_path):
    from selenium.webdriver.common.by import By

    submit(browser, server, LINES, "base", "variant")
    for side, name in (("left", "base"), ("right", "variant")):
        status, answer = server.post("/translate", {"model": name, "lines": LINES, "beam": 4, "n_best": 4, "scores": True,
                                                    "alignments": True})  # fmt: skip
        assert status == 200
        panel, translations, rows = rendered(browser, side)
        assert panel.find_element(By.TAG_NAME, "h2").text == name
        assert translations == [group[0]["text"] for group in answer["translations"]]
        assert rows == [
            [str(k + 1), f"{h['score']:.4f}", h["text"]] for group in answer["translations"] for k, h in enumerate(group)
        ]
        heatmaps = panel.find_elements(By.CSS_SELECTOR, "svg.heatmap")
        assert len(heatmaps) == len(LINES)
        marked = heatmaps[0].find_elements(By.CSS_SELECTOR, "rect[fill='#1f5fa8']")
        assert len(marked) == len(answer["translations"][0][0]["alignment"].split())  # one cell an alignment pair
    path = tmp_path / "serve-page.png"
    assert browser.save_screenshot(str(path)) and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if os.environ.get("AIAYN_ARTIFACTS"):
        Path(os.environ["AIAYN_ARTIFACTS"]).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(os.environ["AIAYN_ARTIFACTS"]) / path.name)


def test_a_language_model_beside_a_translation_model(server, browser):
    submit(browser, server, ["she sold"], "base", "lm")
    status, answer = server.post("/generate", {"model": "lm", "prompts": ["she sold"], "greedy": True})
    assert status == 200
    _, translations, rows = rendered(browser, "right")
    assert translations == answer["texts"] and rows == []
    _, translations, rows = rendered(browser, "left")
    assert len(translations) == 1 and len(rows) == 4


def test_the_pages_states_say_what_happened_as_the_api_does(server, browser):
    """An empty input says so where the input is; an answer goes loading -> done with its time and
    copy buttons; an n-best above the beam is capped, saying so; `unique` is the API's; a refusal
    goes loading -> error with the API's message under the input."""
    import re

    from selenium.webdriver.common.by import By

    submit(browser, server, [], "base", "variant")
    assert browser.find_element(By.ID, "input-error").text == "Type a sentence to send (one a line)."
    assert browser.find_element(By.ID, "panel-left").get_attribute("data-states") is None  # nothing was sent

    submit(browser, server, LINES, "base", "", beam=3, nbest=9, unique=True)
    panel, translations, rows = rendered(browser, "left")
    sent = json.loads(panel.get_attribute("data-request"))
    assert sent == {"model": "base", "lines": LINES, "beam": 3, "n_best": 3, "unique": True, "scores": True, "alignments": True}
    status, answer = server.post("/translate", sent)
    assert status == 200
    assert panel.get_attribute("data-states") == "loading done"
    assert panel.find_element(By.CLASS_NAME, "note").text == "n-best 9 is more than the beam (3): at most 3 shown"
    assert rows == [[str(k + 1), f"{h['score']:.4f}", h["text"]] for group in answer["translations"] for k, h in enumerate(group)]
    copies = [b.get_attribute("data-copy") for b in panel.find_elements(By.CLASS_NAME, "copy")]
    assert copies == translations == [group[0]["text"] for group in answer["translations"]]
    assert re.fullmatch(r"answered in \d+ ms", panel.find_element(By.CLASS_NAME, "timing").text)
    assert browser.find_element(By.ID, "panel-right").get_attribute("data-states") == "done"  # (none): nothing to wait for

    submit(browser, server, LINES, "base", "lm", beam=1000)
    status, refused = server.post("/translate", {"model": "base", "lines": LINES, "beam": 1000, "n_best": 4, "scores": True,
                                                 "alignments": True})  # fmt: skip
    assert status == 400
    assert browser.find_element(By.ID, "panel-left").get_attribute("data-states") == "loading error"
    assert browser.find_element(By.ID, "input-error").text == f"base: {refused['error']}"
    assert browser.find_element(By.ID, "panel-right").get_attribute("data-states") == "loading done"


def test_each_models_settings_only_where_a_model_takes_them(server, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.select import Select
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(f"http://127.0.0.1:{server.port}/")
    WebDriverWait(browser, WAIT).until(lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "1")
    shown = {}
    for left, right in (("base", "variant"), ("lm", ""), ("base", "lm")):
        Select(browser.find_element(By.ID, "left")).select_by_value(left)
        Select(browser.find_element(By.ID, "right")).select_by_value(right)
        shown[left, right] = (browser.find_element(By.ID, "translation-settings").is_displayed(),
                              browser.find_element(By.ID, "generation-settings").is_displayed(),
                              browser.find_element(By.ID, "submit").text)  # fmt: skip
    assert shown == {("base", "variant"): (True, False, "Translate"), ("lm", ""): (False, True, "Generate"),
                     ("base", "lm"): (True, True, "Translate")}  # fmt: skip
