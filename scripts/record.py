"""Write site/recorded.json: the lesson's five-message conversation for each system prompt preset
and each window of 256, 512 and 1024 tokens (the same as `python -m chatlens record`).

    python scripts/record.py [--model M] [--out FILE]

Greedy decoding on the Q4_1 GGUF; takes minutes on two cores (OPENBLAS_NUM_THREADS=1 is
faster on a busy machine and gives the same ids here).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "py"))

from chatlens.host.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["record", *sys.argv[1:]]))
