#!/usr/bin/env bash
# Headless Chromium for tests/test_report_page.py, which opens `bench plot`'s index.html in a real browser.
set -euo pipefail
if ! command -v chromium >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends chromium fonts-dejavu-core
fi
