"""TreeRecord.check names the bad link field, with compiled (integer ids) and numpy (other
dtypes, e.g. float node arrays) validation alike."""

import numpy as np
import pytest

from forestgen.tree.record import TreeRecord


def _record(dtype=np.int32, **change):
    # root 0 splits into 1 (leaf) and 2; node 2 splits into 3 and 4 (leaves)
    f = dict(feature=np.array([0, -1, 1, -1, -1], dtype),
             threshold=np.array([0.5, np.nan, 1.5, np.nan, np.nan]),
             nan_left=np.zeros(5, np.uint8), left=np.array([1, -1, 3, -1, -1], dtype),
             right=np.array([2, -1, 4, -1, -1], dtype), cat_off=np.full(5, -1, np.int64),
             cat_left=np.zeros(0, np.uint8), row_node=np.array([1, 3, 4, 4]))
    for k, v in change.items():
        f[k] = np.asarray(v, np.int64 if k == "row_node" else dtype)
    return TreeRecord(**f)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float64])
def test_check_accepts_a_valid_tree_and_names_the_bad_field(dtype):
    assert _record(dtype).check().n_nodes == 5
    cases = {"left": dict(left=[1, -1, 5, -1, -1]), "right": dict(right=[2, 0, 4, -1, -1]),
             "row_node": dict(row_node=[1, 2, 4, 4])}
    for name, change in cases.items():
        with pytest.raises(ValueError, match=f"TreeRecord.{name} must"):
            _record(dtype, **change).check()
    with pytest.raises(ValueError, match="TreeRecord.row_node"):
        _record(dtype, row_node=[1, 3, 7]).check()
    with pytest.raises(ValueError, match="TreeRecord.left"):  # left is checked first
        _record(dtype, left=[0, -1, 3, -1, -1], right=[9, -1, 4, -1, -1]).check()
