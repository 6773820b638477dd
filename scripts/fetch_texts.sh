#!/usr/bin/env bash
# The project's evaluation and calibration texts (docs/data.md): two public-domain English books from
# Project Gutenberg, both shipped as test data in one Debian package (bookworm main), downloaded by
# package name with apt-get, checked by sha256, and extracted into the git-ignored .cache/texts/.
#
#   evaluation text  (nmkit eval, the reference perplexity):  The Adventures of Sherlock Holmes,
#                    Arthur Conan Doyle (Gutenberg #1661): the book only, see below.
#   calibration text (calibrated pruning, docs/design.md section 12): The Adventures of Tom Sawyer,
#                    Mark Twain: as shipped.
#
# The two are different books by different authors, so calibration never sees evaluation text.
# The Sherlock Holmes file ships with a UTF-8 byte-order mark, CRLF line ends and the Gutenberg
# licence around the book; the evaluation text is the lines strictly between the "*** START OF" and
# "*** END OF" markers, with CRLF turned into LF (the mark is on line 1, outside them). Every byte of
# both results is pinned by sha256 below, so nmkit and llama.cpp read the same text everywhere.
#
# Usage: scripts/fetch_texts.sh [eval|calib]   prints the path of that text, or both (eval first).
set -euo pipefail
cd "$(dirname "$0")/.."

package=golang-github-pierrec-lz4-dev
version=2.5.2-2
deb_sha256=1dc71cab6853fb03005f102bf1a71d906d2413c144e1f96c80bb3af99e701550
testdata=usr/share/gocode/src/github.com/pierrec/lz4/testdata
eval_member=pg1661.txt
eval_member_sha256=242ec73a70f0a03dcbe007e32038e7deeaee004aaec9a09a07fa322743440fa8
calib_member=Mark.Twain-Tom.Sawyer.txt
calib_member_sha256=461eb7cb2d57d293fc680c836464c9125e4382be3596f7d415093ae9db8fcb0e

dest=.cache/texts
eval_text=$dest/sherlock-holmes.txt
eval_sha256=9fafb70556b0211ea4e5de5c1b05259027ad4397c407dd33a558a26810923ac9
calib_text=$dest/tom-sawyer.txt
calib_sha256=$calib_member_sha256

check() {  # check FILE SHA256 [NAME]: exit 1 with a one-line message when the sha256 differs
  local got
  got=$(sha256sum "$1" | cut -d' ' -f1)
  if [ "$got" != "$2" ]; then
    echo "fetch_texts: ${3:-$1}: sha256 $got, expected $2" >&2
    exit 1
  fi
}

if [ ! -f "$eval_text" ] || [ ! -f "$calib_text" ]; then
  mkdir -p "$dest" .cache/deb
  deb=.cache/deb/${package}_${version}_all.deb
  if [ ! -f "$deb" ]; then
    echo "fetch_texts: downloading Debian package $package $version" >&2
    sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
    if ! apt-cache show "$package=$version" >/dev/null 2>&1; then
      $sudo_cmd apt-get update -q >&2
    fi
    tmp=$(mktemp -d -p .cache)
    # apt-get download writes into the current directory; _apt cannot always write to mktemp's dir.
    chmod 755 "$tmp"
    (cd "$tmp" && apt-get download -q "$package=$version" >&2)
    mv "$tmp/${package}_${version}_all.deb" "$deb.tmp"
    rm -rf "$tmp"
    mv "$deb.tmp" "$deb"
  fi
  check "$deb" "$deb_sha256"
  tmp=$(mktemp -d -p .cache)  # inside .cache/, so the final mv is a rename on the same file system
  trap 'rm -rf "$tmp"' EXIT
  dpkg-deb -x "$deb" "$tmp"
  check "$tmp/$testdata/$eval_member" "$eval_member_sha256" "$deb: $eval_member"
  check "$tmp/$testdata/$calib_member" "$calib_member_sha256" "$deb: $calib_member"
  awk '/^\*\*\* END OF /{exit} started{sub(/\r$/, ""); print} /^\*\*\* START OF /{started=1}' \
    "$tmp/$testdata/$eval_member" > "$tmp/eval.txt"
  check "$tmp/eval.txt" "$eval_sha256" "$eval_text (extracted from $eval_member)"
  cp "$tmp/$testdata/$calib_member" "$tmp/calib.txt"
  check "$tmp/calib.txt" "$calib_sha256" "$calib_text"
  mv "$tmp/eval.txt" "$eval_text"
  mv "$tmp/calib.txt" "$calib_text"
fi

case "${1:-both}" in
  eval) echo "$eval_text" ;;
  calib) echo "$calib_text" ;;
  both) echo "$eval_text"; echo "$calib_text" ;;
  *) echo "fetch_texts: unknown argument '$1' (expected eval or calib)" >&2; exit 1 ;;
esac
