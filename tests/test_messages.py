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


@pytest.mark.launches
def test_points_all_skipped_for_memory_are_one_reason(tmp_path):
    """Each size's skip names its own bytes, yet it is one reason: 'all N points', not 'the others for 1 other'."""
    done = bench(2, "run", "--algorithms", "native,pairwise", "--sizes", "8,1K", "--nprocs", "2", "--max-memory", "1",
                 "--output", str(tmp_path / "run"))
    assert done.returncode == 1, done.stderr
    [line] = [line for line in done.stderr.splitlines() if line.startswith("error: no point was measured")]
    assert "above --max-memory 1 (all 6 points)" in line and "other reason" not in line, line
