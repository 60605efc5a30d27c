"""python tools/build_web.py [--out build/web] [--check]: the page's build (app/web_build.py says what it
makes). It lives in the app so that an installed wheel's `wisp serve` builds the same; imported from
tools/ (as `import build_web`), this module is app.web_build itself."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from app import web_build  # noqa: E402

if __name__ == "__main__":
    sys.exit(web_build.main())
sys.modules[__name__] = web_build
