"""What commands say beside their numbers: one line where one line is due, the same words for the same mistake."""
from __future__ import annotations

import pytest
from support import bench


@pytest.mark.launches
def test_quiet_still_says_where_the_record_is(tmp_path):
    out = tmp_path / "run"
    done = bench(2, "run", "--algorithms", "native", "--sizes", "8", "--nprocs", "2", "--iterations", "2", "--quiet",
                 "--output", str(out))
    assert done.returncode == 0 and done.stdout == "" and done.stderr.strip() == f"results: {out}", done.stderr
