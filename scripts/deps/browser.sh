#!/usr/bin/env bash
# Test dependency of the report package: headless Chromium opens the HTML
# report (TestHTMLInChromium): it renders the inline SVG, takes a
# screenshot, and its net log proves the page fetched nothing. Debian's
# chromium, installed at /usr/bin/chromium. Idempotent.
set -euo pipefail
if ! [ -x /usr/bin/chromium ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core
fi
