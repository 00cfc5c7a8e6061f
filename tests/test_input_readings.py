"""Issue 18 §5: input that used to be read silently wrong is read right or refused, naming the readings."""

import csv
import time

import numpy as np
import pytest

import dpopt
from dpopt import StratifiedDesign
from dpopt.cli import main
from dpopt.frames import Frame, is_missing, parse_number, read_csv
from dpopt.io import modelfile
from dpopt.models.tree import Hierarchy

STRATA = {"N": [30, 40, 50], "sigma2": [1.0, 2.0, 3.0]}


def _file(strata_table, **tables):
    return {"family": "stratified", "epsilon": 1.0, "total": 40, "strata": {**STRATA, **strata_table}, **tables}


# ------------------------------------------------------------------ strata references
@pytest.mark.parametrize("table", ["constraint", "precision"])
def test_integer_that_is_an_index_and_a_label_is_ambiguous(table):
    spec = ({"strata": [2], "coefficients": 1, "sense": ">=", "rhs": 5} if table == "constraint"
            else {"strata": [2], "target": 10.0})
    with pytest.raises(modelfile.ModelFileError) as info:
        modelfile.from_dict(_file({"label": [1, 2, 3]}, **{table: [spec]}))
    text = str(info.value)
    assert "ambiguous" in text and "labelled '3'" in text and "stratum 1" in text and "strata" in text
    # the label as a string is one reading only
    model, _ = modelfile.from_dict(_file({"label": [1, 2, 3]}, **{table: [{**spec, "strata": ["2"]}]}))
    idx = model.constraints[0].A[0] if table == "constraint" else model.precision_targets[0].weights
    assert np.flatnonzero(idx).tolist() == [1]


def test_indices_stay_indices_where_they_cannot_be_labels():
    d = StratifiedDesign(N=[30, 40, 50], sigma2=[1, 2, 3], total=40, epsilon=1.0)     # default labels
    assert d.strata_index([1, 2]).tolist() == [1, 2]
    d = StratifiedDesign(N=[30, 40, 50], sigma2=[1, 2, 3], total=40, epsilon=1.0, labels=["a", "b", "c"])
    assert d.strata_index([0, 2]).tolist() == [0, 2]
    d = StratifiedDesign(N=[30, 40, 50], sigma2=[1, 2, 3], total=40, epsilon=1.0, labels=[0, 1, 2])
    assert d.strata_index([0, 2]).tolist() == [0, 2]     # the index and the label agree
    d = StratifiedDesign(N=[30, 40, 50], sigma2=[1, 2, 3], total=40, epsilon=1.0, labels=[1, 2, 3])
    with pytest.raises(ValueError, match="ambiguous"):
        d.strata_index([1])


def test_a_name_that_is_a_domain_and_a_label_is_ambiguous():
    table = {"label": ["a", "b", "c"], "domain": ["b", "b", "x"]}
    with pytest.raises(modelfile.ModelFileError) as info:
        modelfile.from_dict(_file(table, precision=[{"strata": "b", "target": 10.0}]))
    assert "ambiguous" in str(info.value) and "domain" in str(info.value) and "label" in str(info.value)
    with pytest.raises(modelfile.ModelFileError, match="ambiguous"):
        modelfile.from_dict(_file(table, constraint=[{"strata": "b", "coefficients": 1, "rhs": 30}]))
    d = StratifiedDesign(N=[30, 40, 50], sigma2=[1, 2, 3], total=40, epsilon=1.0, labels=["a", "b", "c"],
                         domains=["b", "b", "x"])
    with pytest.raises(ValueError, match="ambiguous"):
        d.add_constraint({"b": 1.0}, 30)
    assert d.strata_index("x").tolist() == [2] and d.strata_index("a").tolist() == [0]
    # a one-stratum domain named like its own stratum means the same either way
    d = StratifiedDesign(N=[30, 40, 50], sigma2=[1, 2, 3], total=40, epsilon=1.0, labels=["a", "b", "c"],
                         domains=["a", "y", "y"])
    assert d.strata_index("a").tolist() == [0]


# ------------------------------------------------------------------ missing values
def test_is_missing_and_parse_number():
    pd = pytest.importorskip("pandas")
    for v in (None, float("nan"), np.float32("nan"), pd.NA, pd.NaT, np.datetime64("NaT"), "", "  "):
        assert is_missing(v), v
    for v in (0, "0", "NA", "None", 1.5, "x"):
        assert not is_missing(v), v
    for text in ("1_000", "\u0661\u0662", "\uff11\uff12", "1 000", "0x10", "nan", "inf", "1e", "--1", "½", "٣.٥"):
        assert parse_number(text) is None, text
    assert parse_number(" -1.5e3 ") == -1500.0 and parse_number("7", integer=True) == 7
    assert parse_number("7.5", integer=True) is None and parse_number(True) is None


def test_pandas_missing_values_are_not_strata_or_nodes():
    pd = pytest.importorskip("pandas")
    for missing in (pd.NA, pd.NaT, None):
        df = pd.DataFrame({"region": pd.Series(["a", "a", missing, "b", "b"], dtype=object),
                           "y": [1.0, 2.0, 3.0, 4.0, 5.0]})
        with pytest.raises(ValueError, match="strata column 'region' has a missing value at row 2"):
            StratifiedDesign.from_frame(df, "region", "y", total=3, epsilon=1.0)
        with pytest.raises(ValueError, match="missing value"):
            Hierarchy.from_frame(df, ["region"])
        with pytest.raises(ValueError, match="missing node id"):
            Hierarchy.from_table(pd.DataFrame({"id": ["r", missing], "parent": [None, "r"], "count": [2.0, 2.0]}))
    nullable = pd.DataFrame({"region": pd.Series(["a", "a", "b", "b"], dtype="string"),
                             "y": pd.Series([1.0, None, 3.0, 4.0], dtype="Float64")})
    with pytest.raises(ValueError, match="y column 'y' has a missing value"):
        StratifiedDesign.from_frame(nullable, "region", "y", total=3, epsilon=1.0)
    cat = pd.DataFrame({"region": pd.Categorical(["a", None, "b", "b"]), "y": [1.0, 2.0, 3.0, 4.0]})
    with pytest.raises(ValueError, match="missing value at row 1"):
        StratifiedDesign.from_frame(cat, "region", "y", total=3, epsilon=1.0)


# ------------------------------------------------------------------ numbers
@pytest.mark.parametrize("text", ["1_000", "\u0661\u0662", "\uff11\uff12", "nan", "inf"])
def test_numbers_are_ascii_decimals(tmp_path, text):
    frame = {"region": ["a", "a", "b", "b"], "y": ["1", text, "3", "4"]}
    with pytest.raises(ValueError, match=r"y column 'y' must be numeric .*row 1"):
        Frame(frame).numeric("y", "y")
    path = tmp_path / "frame.csv"
    with path.open("w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows([["region", "y"]] + [list(r) for r in zip(frame["region"], frame["y"])])
    with pytest.raises(ValueError, match="must be numeric"):
        StratifiedDesign.from_frame(read_csv(path), "region", "y", total=3, epsilon=1.0)
    with pytest.raises(ValueError, match="is not a number"):
        Hierarchy.from_table([("r", None, "2"), ("c", "r", text)])
    tree = tmp_path / "tree.csv"
    tree.write_text(f"id,parent,count,level\nr,,2,0\nc,r,2,{text}\n", encoding="utf-8")
    with pytest.raises(ValueError, match="not an integer"):
        Hierarchy.from_table(tree, level_col="level")


def test_a_huge_csv_field_is_a_clear_error(tmp_path, capsys):
    path = tmp_path / "frame.csv"
    path.write_text("region,y\na,1\n" + "b," + "9" * 140_000 + "\n", encoding="utf-8")
    with pytest.raises(ValueError) as info:
        read_csv(path)
    assert type(info.value) is ValueError and str(path) in str(info.value) and "line 3" in str(info.value)
    assert main(["design", str(path), "--strata", "region", "--y", "y", "--total", "2", "--epsilon", "1",
                 "--out", str(tmp_path / "m.toml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("dpopt: error: frame") and "not a valid CSV" in err[0]
    assert not (tmp_path / "m.toml").exists()


# ------------------------------------------------------------------ deep trees
def test_from_table_is_linear_in_the_depth_of_a_chain(tmp_path):
    """A chain listed leaf first, read from CSV: the walk up from the leaf checked each step against a list
    of the path so far (14 s for 40 000 nodes, 172 s for 100 000); now ~2 s."""
    n = 40_000
    path = tmp_path / "chain.csv"
    path.write_text("id,parent,count\n" + "".join(f"n{i},{f'n{i - 1}' if i else ''},1\n"
                                                  for i in reversed(range(n))), encoding="utf-8")
    t = time.perf_counter()
    h = Hierarchy.from_table(path)
    assert time.perf_counter() - t < 8.0
    assert h.n_levels == n and h.sizes[-1] == 1 and h.ids[-1] == [f"n{n - 1}"]
    with pytest.raises(ValueError, match="cycle"):
        Hierarchy.from_table([("a", "c", 1.0), ("b", "a", 1.0), ("c", "b", 1.0)])
    assert isinstance(dpopt.toy_hierarchy(), Hierarchy)


@pytest.mark.parametrize("text", ["1_000", "\u0661\u0662"])
def test_population_csv_numbers_are_ascii_decimals(tmp_path, text):
    (tmp_path / "pop.csv").write_text(f"income\n1\n2\n{text}\n4\n", encoding="utf-8")
    f = tmp_path / "study.toml"
    f.write_text('family = "sample_size_study"\nepsilon = 1.0\nstatistic = "mean"\n'
                 '[population]\nkind = "csv"\ncsv = "pop.csv"\ncolumn = "income"\n')
    with pytest.raises(modelfile.ModelFileError, match="row 4, column 1 is not a number"):
        modelfile.load(f)
