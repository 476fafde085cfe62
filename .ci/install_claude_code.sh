#!/usr/bin/env bash
# Install the pinned Claude Code CLI into .tools/claude-code (git-ignored) and print its path.
#
# Why pinned and local: the claude-code backend's integration test must meet one known CLI
# (how it lists skills and where it looks for them changes between versions), and installing
# into the repo keeps the user's global npm and ~/.claude untouched. Idempotent: a second run
# with the pinned version already present does nothing but print the path.
set -euo pipefail

VERSION="${CLAUDE_CODE_VERSION:-2.1.328}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PREFIX="$ROOT/.tools/claude-code"
BIN="$PREFIX/node_modules/.bin/claude"
PKG_JSON="$PREFIX/node_modules/@anthropic-ai/claude-code/package.json"

if ! command -v npm >/dev/null 2>&1; then
    echo "install_claude_code.sh: npm is not installed" >&2
    exit 2
fi

installed=""
if [[ -f "$PKG_JSON" ]]; then
    installed="$(node -e 'process.stdout.write(require(process.argv[1]).version)' "$PKG_JSON" 2>/dev/null || true)"
fi

if [[ "$installed" != "$VERSION" || ! -x "$BIN" ]]; then
    mkdir -p "$PREFIX"
    npm install --prefix "$PREFIX" --no-audit --no-fund --loglevel=error \
        "@anthropic-ai/claude-code@$VERSION" >&2
fi

echo "$BIN"
