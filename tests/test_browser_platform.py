"""WebKit detection from the user agent, on the page (static/platform.js).

Run in Chromium twice over: the pure function on a table of real user agents, and the real
navigator under Playwright's iPad descriptor and a desktop-mode iPad (a Macintosh UA with touch
points, set through CDP: iPadOS Safari asks for desktop sites by default, and then only its touch
points tell it from a Mac)."""

import pytest
from browser_harness import browser  # noqa: F401  (its fixture)
from test_browser_page import base_url  # noqa: F401  (the page tests' static server fixture)

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.browser

SAFARI_MAC = (
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) "
    "Version/26.0 Safari/605.1.15"
)
CHROME_MAC = (
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/140.0.0.0 Safari/537.36"
)
CASES = [
    (SAFARI_MAC, 0, {"webkit": True, "ios": False}),
    (SAFARI_MAC, 5, {"webkit": True, "ios": True, "ipadAsMac": True}),
    (CHROME_MAC, 0, {"webkit": False, "ios": False}),
    (
        "Mozilla/5.0 (iPhone; CPU iPhone OS 18_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
        "CriOS/140.0 Mobile/15E148 Safari/604.1",
        5,
        {"webkit": True, "ios": True},
    ),  # Chrome on iOS is WebKit
    (
        "Mozilla/5.0 (iPad; CPU OS 18_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.0 "
        "Mobile/15E148 Safari/604.1",
        5,
        {"webkit": True, "ios": True},
    ),
    (
        "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/156.0.0.0 Safari/537.36",
        0,
        {"webkit": False},
    ),
    (
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/140.0.0.0 "
        "Safari/537.36 Edg/140.0.0.0",
        0,
        {"webkit": False},
    ),
    ("Mozilla/5.0 (Macintosh; Intel Mac OS X 14.0; rv:140.0) Gecko/20100101 Firefox/140.0", 0, {"webkit": False}),
]
DETECT = """async ([ua, touch]) => {
  const {detectPlatform} = await import("/static/platform.js");
  return ua === null ? detectPlatform() : detectPlatform({userAgent: ua, maxTouchPoints: touch});
}"""


def test_user_agent_table(browser, base_url):
    _, chromium = browser
    page = chromium.new_page()
    page.goto(base_url + "/")
    for ua, touch, want in CASES:
        got = page.evaluate(DETECT, [ua, touch])
        assert {k: got[k] for k in want} == want, (ua, touch, got)
    page.close()


def test_real_navigator_ipad_and_desktop_mode_ipad(browser, base_url):
    p, chromium = browser
    context = chromium.new_context(**p.devices["iPad (gen 7)"])
    page = context.new_page()
    page.goto(base_url + "/")
    assert page.evaluate(DETECT, [None, 0])["ios"] is True
    context.close()

    context = chromium.new_context(has_touch=True)
    page = context.new_page()
    cdp = context.new_cdp_session(page)
    cdp.send("Emulation.setUserAgentOverride", {"userAgent": SAFARI_MAC, "platform": "MacIntel"})
    cdp.send("Emulation.setTouchEmulationEnabled", {"enabled": True, "maxTouchPoints": 5})
    page.goto(base_url + "/")
    got = page.evaluate(DETECT, [None, 0])
    assert got["webkit"] and got["ipadAsMac"], got
    context.close()


def test_desktop_chromium_is_not_webkit(browser, base_url):
    _, chromium = browser
    page = chromium.new_page()
    page.goto(base_url + "/")
    assert page.evaluate(DETECT, [None, 0])["webkit"] is False
    page.close()
