"""Frames in (StratifiedDesign.from_frame, Hierarchy.from_frame) and the sample drawn (dpopt.sampling)."""

import itertools
import math

import numpy as np
import pytest

import dpopt

from dpopt import Hierarchy, StratifiedDesign
from dpopt.frames import design_table, read_csv
from dpopt.sampling import draw_poisson, draw_srs, draw_stratified, sample_key

# a small frame whose N_h and S_h^2 are computed by hand below
FRAME = {"region": ["b", "a", "a", "b", "b", "c", "c", "c", "c"],
         "y": [1.0, 2.0, 4.0, 5.0, 9.0, 0.0, 1.0, 1.0, 2.0],
         "z": [0, 1, 1, 0, 1, 1, 1, 0, 0]}
# a: y = 2, 4          -> mean 3, S^2 = (1 + 1)/1 = 2
# b: y = 1, 5, 9       -> mean 5, S^2 = (16 + 0 + 16)/2 = 16
# c: y = 0, 1, 1, 2    -> mean 1, S^2 = (1 + 0 + 0 + 1)/3 = 2/3
HAND_N = [2, 3, 4]
HAND_S2 = [2.0, 16.0, 2.0 / 3.0]


def _pandas():
    pd = pytest.importorskip("pandas")
    return pd.DataFrame(FRAME)


def _polars():
    pl = pytest.importorskip("polars")
    return pl.DataFrame(FRAME)


@pytest.mark.parametrize("kind", ["dict", "pandas", "polars", "csv"])
def test_from_frame_equals_hand_computed(kind, tmp_path):
    if kind == "dict":
        frame = FRAME
    elif kind == "pandas":
        frame = _pandas()
    elif kind == "polars":
        frame = _polars()
    else:
        frame = tmp_path / "frame.csv"
        frame.write_text("region,y,z\n" + "\n".join(f"{r},{y},{z}" for r, y, z in zip(*FRAME.values())) + "\n")
    m = StratifiedDesign.from_frame(frame, strata="region", y="y", total=5, epsilon=1.0)
    assert m.labels == ["a", "b", "c"]
    assert m.N.tolist() == HAND_N
    assert np.allclose(m.sigma2, HAND_S2, rtol=1e-14)
    assert m.variables == ["y"]
    assert m.frame_columns == {"strata": "region", "y": "y", "sigma2_from": "frame", "sigma2_clamped_to": None}


def test_from_frame_two_variables_and_pilot():
    m = StratifiedDesign.from_frame(FRAME, "region", ["y", "z"], total=5, epsilon=1.0)
    assert m.J == 2 and m.variables == ["y", "z"]
    # z: a = 1, 1 -> 0; b = 0, 0, 1 -> 1/3; c = 1, 1, 0, 0 -> 1/3
    assert np.allclose(m.sigma2_matrix[:, 1], [0.0, 1 / 3, 1 / 3])
    pilot = {"region": ["a", "a", "b", "b", "c", "c"], "y": [0.0, 10.0, 1.0, 2.0, 5.0, 5.0]}
    p = StratifiedDesign.from_frame(FRAME, "region", "y", total=5, epsilon=1.0, pilot=pilot)
    assert p.N.tolist() == HAND_N                           # N from the frame
    assert np.allclose(p.sigma2, [50.0, 0.5, 0.0])          # S^2 from the pilot
    assert p.frame_columns["sigma2_from"] == "pilot"


def test_labels_survive_into_reports_and_tables():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"county": ["Los Angeles"] * 5 + ["San Diego"] * 4, "y": np.arange(9.0)})
    m = StratifiedDesign.from_frame(frame, "county", "y", total=4, epsilon=1.0)
    sol = m.solve()
    assert m.labels == ["Los Angeles", "San Diego"]
    assert "Los Angeles" in m.report(sol)
    table = pd.DataFrame(design_table(m, sol.n))
    assert table["stratum"].tolist() == ["Los Angeles", "San Diego"] and table["n"].sum() == 4
    assert table["N"].tolist() == [5, 4] and np.allclose(table["sampling"] + table["noise"],
                                                         m.variance_breakdown(sol.n)["sampling"]
                                                         + m.variance_breakdown(sol.n)["noise"])
    assert sol.to_frame().index.tolist() == ["Los Angeles", "San Diego"]
    # integer strata codes stay readable: pandas turns an int column with NaN-free values into ints
    m2 = StratifiedDesign.from_frame({"s": [3, 3, 1, 1], "y": [1.0, 2, 3, 5]}, "s", "y", total=2, epsilon=1.0)
    assert m2.labels == ["1", "3"]


@pytest.mark.parametrize("frame, kw, words", [
    (FRAME, {"strata": "state"}, ["strata column 'state'", "columns: 'region'"]),
    (FRAME, {"y": "income"}, ["y column 'income'"]),
    ({"region": ["a", "a", None], "y": [1.0, 2.0, 3.0]}, {}, ["strata column 'region'", "missing value at row 2"]),
    ({"region": ["a", "a", "a"], "y": [1.0, float("nan"), 3.0]}, {}, ["y column 'y'", "NaN", "row 1"]),
    ({"region": ["a", "a", "a"], "y": ["1", "two", "3"]}, {}, ["y column 'y' must be numeric", "'two'"]),
    ({"region": ["a", "a", "b"], "y": [1.0, 2.0, 3.0]}, {}, ["stratum 'b'", "1 unit(s)", "at least 2"]),
    ({"region": ["a", "a"], "y": [1.0, 2.0, 3.0]}, {}, ["different lengths"]),
])
def test_bad_frames_name_the_column(frame, kw, words):
    args = {"strata": "region", "y": "y", "total": 2, "epsilon": 1.0}
    args.update(kw)
    with pytest.raises(ValueError) as exc:
        StratifiedDesign.from_frame(frame, **args)
    for w in words:
        assert w in str(exc.value), (w, str(exc.value))


def test_bad_pilots_and_integer_mechanisms():
    with pytest.raises(ValueError, match="pilot: stratum 'c'.*1 unit"):
        StratifiedDesign.from_frame(FRAME, "region", "y", 5, 1.0,
                                    pilot={"region": ["a", "a", "b", "b", "c"], "y": [1.0, 2, 3, 4, 5]})
    with pytest.raises(ValueError, match="no units in stratum 'c'"):
        StratifiedDesign.from_frame(FRAME, "region", "y", 5, 1.0,
                                    pilot={"region": ["a", "a", "b", "b"], "y": [1.0, 2, 3, 4]})
    with pytest.raises(ValueError, match="stratum 'd', which the frame does not have"):
        StratifiedDesign.from_frame(FRAME, "region", "y", 5, 1.0, pilot={
            "region": ["a", "a", "b", "b", "c", "c", "d", "d"], "y": [1.0, 2, 3, 4, 5, 6, 7, 8]})
    # rescaled (non-integer) data passed to an integer mechanism is refused with the reason
    scaled = dict(FRAME, y=[v / 10 for v in FRAME["y"]])
    with pytest.raises(ValueError, match=r"non-integer value 0\.1 but mechanism 'dlap' privatises integers"):
        StratifiedDesign.from_frame(scaled, "region", "y", 5, 1.0, mechanism="dlap", value_range=(0, 1))
    with pytest.raises(TypeError, match="labels come from the strata column"):
        StratifiedDesign.from_frame(FRAME, "region", "y", 5, 1.0, labels=["x", "y", "z"])
    with pytest.warns(UserWarning, match="outside value_range"):
        StratifiedDesign.from_frame(FRAME, "region", "y", 5, 1.0, value_range=(0, 5))


def test_read_csv_errors(tmp_path):
    with pytest.raises(ValueError, match="no such file"):
        read_csv(tmp_path / "missing.csv")
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n3\n")
    with pytest.raises(ValueError, match="line 3 has 1 fields"):
        read_csv(bad)
    dup = tmp_path / "dup.csv"
    dup.write_text("a,a\n1,2\n")
    with pytest.raises(ValueError, match="column 'a' appears twice"):
        read_csv(dup)


# ---------------------------------------------------------------------------------- hierarchies
def test_hierarchy_from_frame_counts_by_hand():
    frame = {"state": ["VA", "VA", "VA", "MD", "MD", "VA"],
             "county": ["Fairfax", "Fairfax", "Arlington", "Howard", "Howard", "Arlington"],
             "tract": ["1", "2", "1", "1", "1", "1"]}
    h = Hierarchy.from_frame(frame, ["state", "county", "tract"])
    assert h.ids[0] == ["Total"] and h.counts[0].tolist() == [6.0]
    assert h.ids[1] == ["MD", "VA"] and h.counts[1].tolist() == [2.0, 4.0]
    assert h.ids[2] == ["Howard", "Arlington", "Fairfax"] and h.counts[2].tolist() == [2.0, 2.0, 2.0]
    # tract "1" exists in three counties: three different nodes, labelled by their path
    assert h.ids[3] == ["MD/Howard/1", "VA/Arlington/1", "VA/Fairfax/1", "2"]
    assert h.counts[3].tolist() == [2.0, 2.0, 1.0, 1.0]
    assert h.parents[3].tolist() == [0, 1, 2, 2] and h.consistent
    weighted = Hierarchy.from_frame(dict(frame, people=[10, 20, 5, 7, 8, 1]), ["state", "county"], count="people",
                                    root=None)
    assert weighted.n_levels == 2 and weighted.counts[0].tolist() == [15.0, 36.0]
    assert weighted.counts[1].tolist() == [15.0, 6.0, 30.0]


def test_hierarchy_from_frame_errors():
    with pytest.raises(ValueError, match="level column 'county'"):
        Hierarchy.from_frame({"state": ["VA"]}, ["state", "county"])
    with pytest.raises(ValueError, match="count column 'n' must be >= 0; row 1"):
        Hierarchy.from_frame({"state": ["VA", "MD"], "n": [1, -2]}, ["state"], count="n")
    with pytest.raises(ValueError, match="level column 'state' has a missing value at row 1"):
        Hierarchy.from_frame({"state": ["VA", ""]}, ["state"])
    with pytest.raises(TypeError, match="levels must be a non-empty list"):
        Hierarchy.from_frame({"state": ["VA"]}, "state")


# ---------------------------------------------------------------------------------- sampling
def _design_frame():
    frame = {"id": [f"u{i}" for i in range(60)], "s": ["x"] * 20 + ["y"] * 30 + ["z"] * 10,
             "v": [float(i % 7) for i in range(60)]}
    model = StratifiedDesign.from_frame(frame, "s", "v", total=15, epsilon=1.0)
    return frame, model


def test_stratified_draw_sizes_weights_and_reproducibility():
    frame, model = _design_frame()
    n = np.array([5, 6, 4])
    s = draw_stratified(frame, model, n, strata="s", id="id", seed=7)
    assert s.n.tolist() == [5, 6, 4] and s.size == 15
    for h, lab in enumerate(model.labels):
        rows = s.rows[s.stratum == h]
        assert rows.size == n[h] and all(frame["s"][r] == lab for r in rows)
    assert np.allclose(s.weights, (model.N / n)[s.stratum])
    assert s.ids.tolist() == [frame["id"][r] for r in s.rows]
    again = draw_stratified(frame, model, n, strata="s", id="id", seed=7)
    assert again.rows.tolist() == s.rows.tolist() and again.fingerprint == s.fingerprint
    other = draw_stratified(frame, model, n, strata="s", id="id", seed=8)
    assert other.rows.tolist() != s.rows.tolist() and other.fingerprint != s.fingerprint
    assert sample_key(None) != sample_key(None)             # no seed: a fresh OS key each time


def test_stratified_draw_refuses_a_mismatched_frame():
    frame, model = _design_frame()
    with pytest.raises(ValueError, match="stratum 'x' has 19 units but the model's N is 20"):
        draw_stratified({k: v[1:] for k, v in frame.items()}, model, [5, 6, 4], strata="s", seed=1)
    with pytest.raises(ValueError, match="id column 'id' must be unique"):
        draw_stratified(dict(frame, id=["same"] * 60), model, [5, 6, 4], strata="s", id="id", seed=1)
    with pytest.raises(ValueError, match="one size per stratum"):
        draw_stratified(frame, model, [5, 6], strata="s", seed=1)


def test_srs_every_subset_equally_likely():
    """SRS of 2 out of 5: the 10 subsets over 3000 seeds pass a chi-square test at the 0.1 % level."""
    frame = {"id": list("abcde")}
    counts = dict.fromkeys(itertools.combinations(range(5), 2), 0)
    R = 3000
    for seed in range(R):
        counts[tuple(draw_srs(frame, 2, id="id", seed=seed).rows.tolist())] += 1
    expected = R / 10
    chi2 = sum((c - expected) ** 2 / expected for c in counts.values())
    assert chi2 < 27.88        # chi-square(9) 0.999 quantile


def test_poisson_inclusion_frequencies():
    p = np.array([0.05, 0.2, 0.5, 0.9, 1.0])
    R = 4000
    hits = np.zeros(5)
    for seed in range(R):
        s = draw_poisson({"i": list(range(5))}, p, seed=seed)
        hits[s.rows] += 1
        assert np.allclose(s.weights, 1 / p[s.rows])
    se = np.sqrt(p * (1 - p) / R)
    assert np.all(np.abs(hits / R - p) <= 4.5 * se + 1e-12)
    assert hits[4] == R                                    # π = 1 is always taken
    with pytest.raises(ValueError, match=r"probabilities must be in \(0, 1\]; row 0"):
        draw_poisson({"i": [1, 2]}, [0.0, 0.5], seed=1)


def test_sample_csv_and_frame(tmp_path):
    frame, model = _design_frame()
    s = draw_stratified(frame, model, [5, 6, 4], strata="s", id="id", seed=3)
    path = s.to_csv(tmp_path / "sample.csv")
    back = read_csv(path)
    assert back["id"] == s.ids.tolist() and list(back) == ["id", "stratum", "inclusion_probability", "weight"]
    assert [float(w) for w in back["weight"]] == pytest.approx(s.weights.tolist(), rel=1e-15)
    pd = pytest.importorskip("pandas")
    df = s.to_frame()
    assert isinstance(df, pd.DataFrame) and df["stratum"].tolist()[:5] == ["x"] * 5
    assert math.isclose(df["weight"].sum(), 60.0)


def test_sigma2_is_the_variance_of_the_clamped_values_the_release_releases():
    """With value_range, S_h² from the frame or the pilot is the variance of the values clamped to the range
    (what the release privatises): an outlier in one stratum's pilot no longer multiplies its S_h² and its
    allocation; the report says where S_h² came from and that it was clamped."""
    import warnings

    frame = {"s": ["a"] * 50 + ["b"] * 50, "y": [float(i % 7) for i in range(100)]}
    pilot = {"s": ["a"] * 6 + ["b"] * 6, "y": [1.0, 2.0, 3.0, 4.0, 5.0, 2900.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = dpopt.StratifiedDesign.from_frame(frame, "s", "y", 20, 1.0, pilot=pilot, value_range=(0, 10))
    want_a = np.var(np.clip([1.0, 2.0, 3.0, 4.0, 5.0, 2900.0], 0, 10), ddof=1)
    want_b = np.var([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], ddof=1)
    np.testing.assert_allclose(m.sigma2, [want_a, want_b], rtol=1e-15)
    rep = m.report(m.solve())
    assert "clamped to [0, 10]" in rep and "from the pilot" in rep
    # the frame itself, clamped too
    f2 = {"s": ["a"] * 4 + ["b"] * 4, "y": [-5.0, 1.0, 2.0, 30.0, 1.0, 2.0, 3.0, 4.0]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m2 = dpopt.StratifiedDesign.from_frame(f2, "s", "y", 4, 1.0, value_range=(0, 10))
    np.testing.assert_allclose(m2.sigma2, [np.var([0.0, 1.0, 2.0, 10.0], ddof=1), np.var([1.0, 2.0, 3.0, 4.0], ddof=1)])
    # without value_range nothing is clamped
    m3 = dpopt.StratifiedDesign.from_frame(f2, "s", "y", 4, 1.0)
    assert m3.sigma2[0] == pytest.approx(np.var([-5.0, 1.0, 2.0, 30.0], ddof=1))


def test_domains_as_a_mapping_or_a_frame_column():
    """A mapping label -> domain is read by label (it was read as its keys: every stratum its own domain);
    from_frame takes a column name constant within strata; anything incomplete or ambiguous is refused."""
    N, s2 = [100, 200, 300, 400], [1.0, 2.0, 3.0, 4.0]
    labels = ["VA", "MD", "CA", "OR"]
    region = {"OR": "West", "VA": "South", "CA": "West", "MD": "South"}     # not in label order
    m = dpopt.StratifiedDesign(N, s2, 40, 1.0, labels=labels, domains=region)
    assert m.domains == ["South", "South", "West", "West"]
    assert list(m.strata_index("West")) == [2, 3]
    with pytest.raises(ValueError, match="no domain for stratum 'OR'"):
        dpopt.StratifiedDesign(N, s2, 40, 1.0, labels=labels, domains={"VA": "S", "MD": "S", "CA": "W"})
    with pytest.raises(ValueError, match="'TX', which is not a stratum label"):
        dpopt.StratifiedDesign(N, s2, 40, 1.0, labels=labels, domains={**region, "TX": "South"})
    frame = {"state": ["VA", "VA", "MD", "MD", "CA", "CA", "OR", "OR"],
             "region": ["South", "South", "South", "South", "West", "West", "West", "West"],
             "y": [1.0, 2.0, 3.0, 5.0, 2.0, 7.0, 1.0, 4.0]}
    mf = dpopt.StratifiedDesign.from_frame(frame, "state", "y", 6, 1.0, domains="region")
    assert dict(zip(mf.labels, mf.domains)) == {"CA": "West", "MD": "South", "OR": "West", "VA": "South"}
    bad = dict(frame, region=["South", "West"] + frame["region"][2:])
    with pytest.raises(ValueError, match="not constant within stratum 'VA'"):
        dpopt.StratifiedDesign.from_frame(bad, "state", "y", 6, 1.0, domains="region")
    with pytest.raises(ValueError, match="'regio' is not a column"):
        dpopt.StratifiedDesign.from_frame(frame, "state", "y", 6, 1.0, domains="regio")


def test_permanent_random_numbers_are_the_documented_keyed_blake2b():
    """Each unit's number is BLAKE2b(str(id), key, 8 bytes, person 'dpopt-prn') read big-endian, for row
    numbers, text ids and mixed ids alike (the oracle is hashlib, one id at a time)."""
    import hashlib

    from dpopt.sampling import _numbers

    key = sample_key("a long secret")
    for ids in (np.arange(500), np.array([f"id{i}" for i in range(300)], dtype=object),
                np.array([7, "x", 3.5, "ü"], dtype=object), np.arange(0)):
        want = [int.from_bytes(hashlib.blake2b(str(u).encode(), key=key, digest_size=8,
                                               person=b"dpopt-prn").digest(), "big") for u in ids]
        got = _numbers(key, ids)
        assert got.dtype == np.uint64 and [int(x) for x in got] == want
