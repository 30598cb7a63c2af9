#!/usr/bin/env bash
# Vendor the CSS, scripts and fonts that GX's Data Docs pages load from CDNs, so the pages work
# offline: fetch exactly the npm releases named in expectations/suites.py (OFFLINE_URLS,
# VENDORED_DEPENDENCIES) with `npm pack`, keep only the files the pages use plus each package's
# license, check the two files GX loads with an integrity hash against that hash, and write
# expectations/data/docs_assets/<package>/<version>/<file> and its MANIFEST.txt (package, version,
# file, sha256). Same registry content => byte-identical output. Needs npm and the registry.
#
#   bash scripts/vendor_docs_assets.sh        (PYTHON=... to use another interpreter than .venv's)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
DEST=expectations/data/docs_assets
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Licenses of the packages whose npm tarball carries no license file.
fallback_license() {  # package version -> stdout
  case "$1" in
    vega) cat <<'EOF'
The npm package vega@VERSION ships no license file; its package.json declares "BSD-3-Clause"
(author: UW Interactive Data Lab). The LICENSE of its repository, github.com/vega/vega:

Copyright (c) 2013, Trifacta Inc.
All rights reserved.

Redistribution and use in source and binary forms, with or without
modification, are permitted provided that the following conditions are met:

* Redistributions of source code must retain the above copyright notice, this
  list of conditions and the following disclaimer.

* Redistributions in binary form must reproduce the above copyright notice,
  this list of conditions and the following disclaimer in the documentation
  and/or other materials provided with the distribution.

* Neither the name of Trifacta Inc. nor the names of its contributors may be 
  used to endorse or promote products derived from this software without 
  specific prior written permission.

THIS SOFTWARE IS PROVIDED BY THE COPYRIGHT HOLDERS AND CONTRIBUTORS "AS IS"
AND ANY EXPRESS OR IMPLIED WARRANTIES, INCLUDING, BUT NOT LIMITED TO, THE
IMPLIED WARRANTIES OF MERCHANTABILITY AND FITNESS FOR A PARTICULAR PURPOSE ARE
DISCLAIMED. IN NO EVENT SHALL THE COPYRIGHT OWNER OR CONTRIBUTORS BE LIABLE
FOR ANY DIRECT, INDIRECT, INCIDENTAL, SPECIAL, EXEMPLARY, OR CONSEQUENTIAL
DAMAGES (INCLUDING, BUT NOT LIMITED TO, PROCUREMENT OF SUBSTITUTE GOODS OR
SERVICES; LOSS OF USE, DATA, OR PROFITS; OR BUSINESS INTERRUPTION) HOWEVER
CAUSED AND ON ANY THEORY OF LIABILITY, WHETHER IN CONTRACT, STRICT LIABILITY,
OR TORT (INCLUDING NEGLIGENCE OR OTHERWISE) ARISING IN ANY WAY OUT OF THE USE
OF THIS SOFTWARE, EVEN IF ADVISED OF THE POSSIBILITY OF SUCH DAMAGE.
EOF
    ;;
    popper.js) cat <<'EOF'
The npm package popper.js@VERSION ships no license file; its package.json declares "MIT", its
README "Code and documentation copyright 2016 Federico Zivolo. Code released under the MIT
license", and dist/umd/popper.min.js opens with "Copyright (C) Federico Zivolo 2017 / Distributed
under the MIT License". The MIT License:

Copyright (C) Federico Zivolo 2017

Permission is hereby granted, free of charge, to any person obtaining a copy of this software and
associated documentation files (the "Software"), to deal in the Software without restriction,
including without limitation the rights to use, copy, modify, merge, publish, distribute,
sublicense, and/or sell copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all copies or
substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED, INCLUDING BUT
NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY, FITNESS FOR A PARTICULAR PURPOSE AND
NONINFRINGEMENT. IN NO EVENT SHALL THE AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES
OR OTHER LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM, OUT OF OR IN
CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE SOFTWARE.
EOF
    ;;
    *) return 1 ;;
  esac
}

# package version file, one line per vendored file (licenses aside), from the package's own table.
mapfile -t FILES < <("$PY" -c '
from expectations.suites import vendored_files
for package, version, file in vendored_files():
    print(package, version, file)')
[ "${#FILES[@]}" -gt 0 ] || { echo "vendor: expectations.suites.vendored_files() is empty" >&2; exit 1; }
mapfile -t PACKAGES < <(printf '%s\n' "${FILES[@]}" | awk '{print $1, $2}' | sort -u)

stage="$work/docs_assets"
mkdir -p "$stage"
for pv in "${PACKAGES[@]}"; do
  read -r pkg ver <<<"$pv"
  tgz=$(cd "$work" && npm pack --loglevel=error "$pkg@$ver" | tail -n 1)
  unpacked="$work/x/$pkg/$ver"
  mkdir -p "$unpacked" "$stage/$pkg/$ver"
  tar -xzf "$work/$tgz" -C "$unpacked"
  got=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["version"])' "$unpacked/package/package.json")
  [ "$got" = "$ver" ] || { echo "vendor: npm gave $pkg@$got for $pkg@$ver" >&2; exit 1; }
  license=
  for name in LICENSE LICENSE.txt LICENSE.md LICENCE license; do
    if [ -f "$unpacked/package/$name" ]; then license=$name; break; fi
  done
  if [ -n "$license" ]; then
    cp "$unpacked/package/$license" "$stage/$pkg/$ver/$license"
  elif fallback_license "$pkg" >/dev/null; then
    fallback_license "$pkg" | sed "s/@VERSION/@$ver/" >"$stage/$pkg/$ver/LICENSE"
  else
    echo "vendor: $pkg@$ver has no license file; add its notice to fallback_license in $0" >&2
    exit 1
  fi
  echo "vendor: $pkg@$ver ($tgz, license: ${license:-LICENSE written from its declared license})"
done
for line in "${FILES[@]}"; do
  read -r pkg ver file <<<"$line"
  src="$work/x/$pkg/$ver/package/$file"
  [ -f "$src" ] || { echo "vendor: $pkg@$ver has no file $file" >&2; exit 1; }
  mkdir -p "$(dirname "$stage/$pkg/$ver/$file")"
  cp "$src" "$stage/$pkg/$ver/$file"
done

# Check the vendored bytes against the integrity hashes of GX's templates, then write the manifest.
"$PY" - "$stage" <<'EOF'
import base64, hashlib, re, sys
from pathlib import Path

import great_expectations
from expectations.suites import OFFLINE_URLS, VENDOR_DIR

stage = Path(sys.argv[1])
templates = Path(great_expectations.__file__).parent / "render" / "view" / "templates"
checked = 0
for template in sorted(templates.glob("*.j2")):
    for url, algo, want in re.findall(r'src="([^"]+)"\s+integrity="(sha\d+)-([^"]+)"', template.read_text()):
        path = OFFLINE_URLS[url]
        got = base64.b64encode(hashlib.new(algo, (stage / path[len(VENDOR_DIR) + 1:]).read_bytes()).digest()).decode()
        if got != want:
            sys.exit(f"vendor: {path} does not match the integrity hash of {url} in {template.name}")
        checked += 1
print(f"vendor: {checked} files match the integrity hashes of GX's templates")

rows = []
for f in sorted(p for p in stage.rglob("*") if p.is_file()):
    parts = f.relative_to(stage).parts
    n = 2 if parts[0].startswith("@") else 1  # a scoped package: @scope/name
    rows.append(("/".join(parts[:n]), parts[n], "/".join(parts[n + 1:]), hashlib.sha256(f.read_bytes()).hexdigest()))
header = """\
# Offline copies of what the GX Data Docs pages load from CDNs (expectations/suites.py: OFFLINE_URLS
# maps each CDN URL to its file here, VENDORED_DEPENDENCIES adds the font-awesome webfonts), fetched
# from the npm registry by scripts/vendor_docs_assets.sh and copied by every Data Docs build to
# OUTPUT/data_docs/static/vendor/, where the rewritten pages load them.
# Refresh (a Great Expectations upgrade that changes its CDN URLs, or a new pinned release):
#   1. list the URLs GX's templates load: grep -rhoE "https?://[^\\"' )]+"
#        .venv/lib/python3.11/site-packages/great_expectations/render/view/ | sort -u
#   2. edit OFFLINE_URLS (and VENDORED_DEPENDENCIES) in expectations/suites.py: CDN URL -> static/vendor/
#      <npm package>/<exact version>/<file in the package>
#   3. bash scripts/vendor_docs_assets.sh  (rewrites this directory and this file)
#   4. .venv/bin/python -m pytest -q tests/test_expectations.py -k docs  (no page may load a URL
#      from the network, and the pages must render in headless Chromium)
# Columns: package version file sha256 (one vendored file a line; the licenses are listed too)
"""
width = [max(len(r[i]) for r in rows) for i in range(3)]
lines = ["  ".join(r[i].ljust(width[i]) for i in range(3)) + "  " + r[3] for r in rows]
(stage / "MANIFEST.txt").write_text(header + "\n".join(lines) + "\n")
total = sum((stage / f"{r[0]}/{r[1]}/{r[2]}").stat().st_size for r in rows)
print(f"vendor: {len(rows)} files, {total / 1024:.0f} KiB")
EOF

rm -rf "$DEST"
mkdir -p "$(dirname "$DEST")"
cp -R "$stage" "$DEST"
echo "vendor: wrote $DEST (see $DEST/MANIFEST.txt)"
