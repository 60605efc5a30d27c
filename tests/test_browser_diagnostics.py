"""The "Check this device" panel with the real worker and engine, in headless Chromium (SwiftShader
WebGPU, which has no shader-f16), on a server with no model: the check needs none.

Open the GPU panel, press "Check this device", wait for the suite (py_engine/selftest/suite.py)
to finish in the worker; every test must be listed and passed, the limits and the submit strategy
shown, and the plain-text report (shown in a <pre>, and copied by "Copy report") must hold them."""

import re

import pytest
from browser_harness import ROOT, app_server, check_protocol, launch, record_protocol

from py_engine.selftest.suite import TESTS

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.browser
expect = playwright_api.expect
ARTIFACTS = ROOT / "tests" / "artifacts"
NAMES = [name for name, _ in TESTS]


@pytest.fixture(scope="module")
def server():
    with app_server("--no-default") as (url, _):
        yield url


def test_check_this_device(server, tmp_path):
    with playwright_api.sync_playwright() as p:
        context = launch(p, tmp_path / "profile", viewport={"width": 1280, "height": 900})
        context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server)
        traffic = record_protocol(context)
        page = context.new_page()
        errors = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(server + "/")
        page.wait_for_selector("body[data-models=ready]")

        page.locator("#gpu-panel summary").click()
        page.get_by_role("button", name="Check this device").click()
        dialog = page.get_by_test_id("diagnostics")
        expect(dialog).to_be_visible()
        expect(page.get_by_test_id("gpu-panel").locator(".gpu-body")).to_be_hidden()  # the menu made way
        # Results arrive one by one while the suite runs (the first before the last is done).
        expect(page.get_by_test_id("diagnostics-result").first).to_be_visible(timeout=240_000)
        page.wait_for_selector("#diagnostics[data-state=done], #diagnostics[data-state=error]", timeout=300_000)
        status = page.get_by_test_id("diagnostics-status").inner_text()
        rows = page.get_by_test_id("diagnostics-result")
        shown = [rows.nth(i).locator(".diag-name").inner_text() for i in range(rows.count())]
        failed = [
            rows.nth(i).inner_text() for i in range(rows.count()) if rows.nth(i).get_attribute("data-ok") != "true"
        ]
        assert shown == NAMES, (status, shown)
        assert not failed, failed
        assert status == f"All {len(NAMES)} tests passed."
        expect(rows.locator(".diag-verdict")).to_have_text(["Passed"] * len(NAMES))

        device = page.get_by_test_id("diagnostics-device")
        expect(device).to_contain_text(re.compile("swiftshader", re.I))
        expect(page.get_by_test_id("diagnostics-submit")).to_have_text("single-pass")  # desktop Chromium: Dawn
        limits = page.get_by_test_id("diagnostics-limits")
        expect(limits).to_contain_text("max_storage_binding")
        expect(limits.locator("tr", has_text="max_storage_binding")).to_contain_text("128 MiB")
        expect(limits.locator("tr", has_text="max_workgroup_storage")).to_contain_text("16 KiB")
        # The diagnose message and every event of the real worker fit protocol.py's table.
        assert {"diagnose", "diagnostic", "diagnostics"} <= set(check_protocol(traffic))

        report = page.get_by_test_id("diagnostics-report").inner_text()
        assert report.startswith(f"Wisp device check: {len(NAMES)} of {len(NAMES)} passed")
        assert re.search(r"^Adapter: .*swiftshader", report, re.I | re.M) and "Submit: single-pass - Dawn" in report
        assert "max_storage_binding = 134217728" in report and "max_workgroup_storage = 16384" in report
        features = re.search(r"^Features: (.*)$", report, re.M).group(1).split(", ")
        assert (
            "subgroups" in features and "shader-f16" not in features
        )  # SwiftShader; the GEMV checks reduce with subgroups
        for name in NAMES:
            assert f"PASS {name} (" in report

        page.get_by_test_id("diagnostics-copy").click()
        expect(page.get_by_test_id("diagnostics-copied")).to_have_text("Copied to the clipboard.")
        assert page.evaluate("navigator.clipboard.readText()") == report

        ARTIFACTS.mkdir(exist_ok=True)
        dialog.evaluate("(d) => { d.scrollTop = 0; }")
        page.screenshot(path=str(ARTIFACTS / "check-this-device.png"))
        page.set_viewport_size({"width": 768, "height": 1024})  # an iPad in portrait: the dialog fits
        assert dialog.evaluate("(d) => d.getBoundingClientRect().right") <= 768
        page.screenshot(path=str(ARTIFACTS / "check-this-device-ipad.png"))
        page.get_by_test_id("diagnostics-close").click()
        expect(dialog).to_be_hidden()
        assert not errors, errors
        context.close()


def test_check_this_device_as_an_ipad(server, tmp_path):
    """As an iPad the check runs what a WebKit load would: the calibrated grouped submits (the
    probe runs first) and WebKit's measures, all listed — and every test still passes."""
    with playwright_api.sync_playwright() as p:
        descriptor = {k: v for k, v in p.devices["iPad (gen 7)"].items() if k != "default_browser_type"}
        context = launch(p, tmp_path / "profile", **descriptor)
        page = context.new_page()
        page.goto(server + "/")
        page.wait_for_selector("body[data-models=ready]")
        page.locator("#gpu-panel summary").click()
        page.get_by_role("button", name="Check this device").click()
        page.wait_for_selector("#diagnostics[data-state=done], #diagnostics[data-state=error]", timeout=300_000)
        assert page.get_by_test_id("diagnostics-status").inner_text() == f"All {len(NAMES)} tests passed."
        expect(page.get_by_test_id("diagnostics-submit")).to_contain_text("grouped (all dispatches per command buffer)")
        report = page.get_by_test_id("diagnostics-report").inner_text()
        assert "probed on this device" in report, report
        for measure in ("submit-probe", "grouped-submits", "no-native-f16", "packed-f16-kv"):
            assert measure in report, (measure, report)
        context.close()
