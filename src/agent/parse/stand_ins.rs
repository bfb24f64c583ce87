//! A library that is not installed: what pandas and numpy write for its
//! calls, and its imports that nothing uses. A small model reaches for
//! `scipy.stats.zscore` or sklearn's `MinMaxScaler`; told only that scipy
//! is not there, it drops the import and keeps the call (`NameError: name
//! 'stats' is not defined`), then imports it again, turn after turn. Shown
//! the expression that computes the same value with what is installed (the
//! library's defaults kept: scipy's `zscore` and `skew` divide by n,
//! pandas' `std` and `skew` do not), it writes that instead, and then at
//! times puts the import back over code that no longer calls it: that
//! block runs again without it.

use super::{checks, errors};

/// One call and what computes the same value without its library.
struct StandIn {
    /// The library the call belongs to (its top-level package).
    package: &'static str,
    /// The call as code writes it, after any module prefix: a function
    /// (`zscore`), a class (`MinMaxScaler`) or a method of an object the
    /// library exports (`norm.cdf`).
    call: &'static str,
    /// The call with its usual arguments, as the hint shows it.
    shown: &'static str,
    /// The same value with pandas, numpy or the standard library.
    instead: &'static str,
}

const fn stand_in(
    package: &'static str,
    call: &'static str,
    shown: &'static str,
    instead: &'static str,
) -> StandIn {
    StandIn {
        package,
        call,
        shown,
        instead,
    }
}

const STAND_INS: &[StandIn] = &[
    stand_in(
        "scipy",
        "zscore",
        "zscore(x)",
        "(x - x.mean()) / x.std(ddof=0)",
    ),
    stand_in(
        "scipy",
        "pearsonr",
        "pearsonr(x, y)[0]",
        "x.corr(y) for two Series, np.corrcoef(x, y)[0, 1] for arrays (its p-value needs scipy)",
    ),
    stand_in(
        "scipy",
        "spearmanr",
        "spearmanr(x, y)[0]",
        "x.corr(y, method='spearman') for two Series (its p-value needs scipy)",
    ),
    stand_in(
        "scipy",
        "kendalltau",
        "kendalltau(x, y)[0]",
        "x.corr(y, method='kendall') for two Series (its p-value needs scipy)",
    ),
    stand_in(
        "scipy",
        "skew",
        "skew(x)",
        "((x - x.mean()) ** 3).mean() / x.std(ddof=0) ** 3 (pandas' x.skew() is skew(x, bias=False))",
    ),
    stand_in(
        "scipy",
        "kurtosis",
        "kurtosis(x)",
        "((x - x.mean()) ** 4).mean() / x.std(ddof=0) ** 4 - 3 (pandas' x.kurt() is kurtosis(x, bias=False))",
    ),
    stand_in(
        "scipy",
        "iqr",
        "iqr(x)",
        "x.quantile(0.75) - x.quantile(0.25)",
    ),
    stand_in("scipy", "mode", "mode(x)", "x.mode()[0] for a Series"),
    stand_in("scipy", "sem", "sem(x)", "x.std(ddof=1) / np.sqrt(len(x))"),
    stand_in(
        "scipy",
        "linregress",
        "linregress(x, y)",
        "slope, intercept = np.polyfit(x, y, 1); r = np.corrcoef(x, y)[0, 1]",
    ),
    stand_in("scipy", "gmean", "gmean(x)", "np.exp(np.log(x).mean())"),
    stand_in("scipy", "hmean", "hmean(x)", "len(x) / (1 / x).sum()"),
    stand_in(
        "scipy",
        "rankdata",
        "rankdata(x)",
        "pd.Series(x).rank().to_numpy()",
    ),
    stand_in(
        "scipy",
        "norm.cdf",
        "norm.cdf(z)",
        "0.5 * (1 + math.erf(z / math.sqrt(2)))",
    ),
    stand_in(
        "scipy",
        "norm.pdf",
        "norm.pdf(z)",
        "math.exp(-z ** 2 / 2) / math.sqrt(2 * math.pi)",
    ),
    stand_in(
        "scipy",
        "entropy",
        "entropy(p)",
        "-(q * np.log(q)).sum() with q = p / p.sum()",
    ),
    stand_in(
        "scipy",
        "euclidean",
        "euclidean(a, b)",
        "np.linalg.norm(a - b)",
    ),
    stand_in(
        "scipy",
        "cdist",
        "cdist(a, b)",
        "np.sqrt(((a[:, None, :] - b[None, :, :]) ** 2).sum(axis=-1))",
    ),
    stand_in(
        "sklearn",
        "MinMaxScaler",
        "MinMaxScaler().fit_transform(x)",
        "(x - x.min()) / (x.max() - x.min())",
    ),
    stand_in(
        "sklearn",
        "StandardScaler",
        "StandardScaler().fit_transform(x)",
        "(x - x.mean()) / x.std(ddof=0)",
    ),
    stand_in(
        "sklearn",
        "LabelEncoder",
        "LabelEncoder().fit_transform(x)",
        "pd.factorize(x, sort=True)[0]",
    ),
    stand_in(
        "sklearn",
        "LinearRegression",
        "LinearRegression().fit(X, y)",
        "coefficients = np.linalg.lstsq(np.column_stack([X, np.ones(len(X))]), y, rcond=None)[0] \
         (the intercept last); for one feature slope, intercept = np.polyfit(x, y, 1)",
    ),
    stand_in(
        "sklearn",
        "mean_squared_error",
        "mean_squared_error(y, p)",
        "((y - p) ** 2).mean()",
    ),
    stand_in(
        "sklearn",
        "mean_absolute_error",
        "mean_absolute_error(y, p)",
        "np.abs(y - p).mean()",
    ),
    stand_in(
        "sklearn",
        "r2_score",
        "r2_score(y, p)",
        "1 - ((y - p) ** 2).sum() / ((y - y.mean()) ** 2).sum()",
    ),
    stand_in(
        "sklearn",
        "accuracy_score",
        "accuracy_score(y, p)",
        "(np.asarray(y) == np.asarray(p)).mean()",
    ),
];

/// For a block that failed because `package`'s module is not installed
/// (`error_line`: its `ModuleNotFoundError`), or on a name that module
/// would have given (its `NameError`, after an earlier block of the run
/// failed on the module: `earlier` are those blocks' outputs): what
/// computes each of the block's calls into it with what is installed
/// (`` `zscore(x)` is `...` ``, joined by semicolons), and the package.
/// None when the block calls nothing listed here.
pub fn written_instead<'a>(
    code: &str,
    error_line: &str,
    mut earlier: impl Iterator<Item = &'a str>,
) -> Option<WrittenInstead> {
    let (package, mut bound) = if error_line.starts_with("ModuleNotFoundError:") {
        let package = missing_package(error_line)?;
        (package, bound_from(code, package))
    } else {
        let name = errors::undefined_name(error_line)?;
        let package = earlier.find_map(|output| missing_package(error_line_of(output)))?;
        (package, vec![name])
    };
    bound.retain(|name| !name.is_empty());
    let called: Vec<String> = STAND_INS
        .iter()
        .filter(|s| s.package == package && calls_through(code, s.call, &bound))
        .map(|s| format!("`{}` is `{}`", s.shown, s.instead))
        .collect();
    (!called.is_empty()).then(|| WrittenInstead {
        package: package.to_owned(),
        calls: called.join("; "),
    })
}

/// What [`written_instead`] found.
#[derive(Debug, PartialEq)]
pub struct WrittenInstead {
    /// The package that is not installed.
    pub package: String,
    /// Each call the block makes into it, and what computes the same.
    pub calls: String,
}

/// `code`, which failed with `error_line` (a `ModuleNotFoundError`),
/// without its imports of the missing package whose names nothing else in
/// it uses, and the first such import; None when an import of it is used
/// (or shares its line with another package's).
pub fn without_unused_import(code: &str, error_line: &str) -> Option<(String, String)> {
    if !error_line.starts_with("ModuleNotFoundError:") {
        return None;
    }
    let package = missing_package(error_line)?;
    let lines: Vec<&str> = code.lines().collect();
    let mut dropped = Vec::new();
    for (index, line) in lines.iter().enumerate() {
        let bound = bound_from(line, package);
        if bound.is_empty() {
            continue;
        }
        let used = lines.iter().enumerate().any(|(other, text)| {
            other != index && bound.iter().any(|name| checks::mentions(text, name))
        });
        if used || !imports_only(line, package) {
            return None;
        }
        dropped.push(index);
    }
    let first = lines[*dropped.first()?].trim().to_owned();
    let kept: Vec<&str> = lines
        .iter()
        .enumerate()
        .filter(|(index, _)| !dropped.contains(index))
        .map(|(_, line)| *line)
        .collect();
    Some((kept.join("\n"), first))
}

/// Whether an import `line` imports from `package` alone (not `import
/// numpy as np, scipy`).
fn imports_only(line: &str, package: &str) -> bool {
    let line = line.trim();
    if line.starts_with("from ") {
        return true;
    }
    line.strip_prefix("import ").is_some_and(|rest| {
        rest.split(',')
            .all(|module| module.trim().split('.').next() == Some(package))
    })
}

/// The top-level package a `No module named 'scipy.stats'` line names.
fn missing_package(error_line: &str) -> Option<&str> {
    let rest = error_line.split_once("No module named '")?.1;
    let module = rest.split_once('\'')?.0;
    module.split('.').next().filter(|p| !p.is_empty())
}

/// The line of a traceback that says a module is not there, if any.
fn error_line_of(output: &str) -> &str {
    output
        .lines()
        .rev()
        .find(|line| line.starts_with("ModuleNotFoundError:"))
        .unwrap_or("")
}

/// The names `code`'s imports bind to `package` or to what it holds:
/// `stats` of `from scipy import stats`, `st` of `import scipy.stats as
/// st`, `scipy` of `import scipy.stats`, `zscore` of `from scipy.stats
/// import zscore`.
fn bound_from<'a>(code: &'a str, package: &str) -> Vec<&'a str> {
    let of_package = |module: &str| {
        module
            .split('.')
            .next()
            .is_some_and(|top| top.trim() == package)
    };
    let mut bound = Vec::new();
    for line in code.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("from ") {
            let Some((module, names)) = rest.split_once(" import ") else {
                continue;
            };
            if of_package(module) {
                let names = names.trim_matches(|c: char| c == '(' || c == ')' || c.is_whitespace());
                bound.extend(names.split(',').map(|n| alias(n.trim())));
            }
        } else if let Some(rest) = line.strip_prefix("import ") {
            for module in rest.split(',').map(str::trim) {
                if of_package(module) {
                    bound.push(match module.split_once(" as ") {
                        Some((_, name)) => name.trim(),
                        None => module.split('.').next().unwrap_or(module),
                    });
                }
            }
        }
    }
    bound
}

/// `z` of `zscore as z`, `zscore` of `zscore`.
fn alias(imported: &str) -> &str {
    imported
        .split_once(" as ")
        .map_or(imported, |(_, name)| name.trim())
}

/// Whether `code` calls `call` (`zscore(`, `stats.zscore(`,
/// `scipy.stats.zscore(`, `norm.cdf(`, `MinMaxScaler()`) through one of
/// the `bound` names: the first name of the dotted path before the call,
/// or of the call itself when nothing is before it. (`df.mode()` is
/// pandas' own, not scipy's.)
fn calls_through(code: &str, call: &str, bound: &[&str]) -> bool {
    calls(code, call).any(|path| {
        let first = path.unwrap_or(call).split('.').next().unwrap_or("");
        bound.contains(&first)
    })
}

/// Each place `code` calls `call`, with the dotted path written before it
/// (`scipy.stats` of `scipy.stats.zscore(`), if any.
fn calls<'a>(code: &'a str, call: &'a str) -> impl Iterator<Item = Option<&'a str>> + 'a {
    let part = |c: char| c.is_alphanumeric() || c == '_';
    code.match_indices(call).filter_map(move |(at, _)| {
        let after = code[at + call.len()..].trim_start();
        if !after.starts_with('(') {
            return None;
        }
        let before = &code[..at];
        match before.chars().next_back() {
            Some('.') => {
                let path_end = before.len() - 1;
                let path_start = before[..path_end]
                    .char_indices()
                    .rev()
                    .find(|(_, c)| !part(*c) && *c != '.')
                    .map_or(0, |(i, c)| i + c.len_utf8());
                Some(Some(&before[path_start..path_end]))
            }
            Some(c) if part(c) => None,
            _ => Some(None),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const FAILED_IMPORT: &str = "ModuleNotFoundError: No module named 'scipy'";

    /// The recorded answer of a development task: scipy's z-score, scipy
    /// not installed.
    const ZSCORE: &str = "import pandas as pd\nfrom scipy import stats\n\n\
        insurance = pd.read_csv('insurance.csv')\n\
        insurance['z_score'] = stats.zscore(insurance['charges'])\n";

    #[test]
    fn a_missing_module_is_answered_with_what_computes_its_calls() {
        let hint = written_instead(ZSCORE, FAILED_IMPORT, std::iter::empty()).unwrap();
        assert_eq!(hint.package, "scipy");
        assert_eq!(
            hint.calls,
            "`zscore(x)` is `(x - x.mean()) / x.std(ddof=0)`"
        );
        let submodule = "ModuleNotFoundError: No module named 'scipy.stats'";
        assert_eq!(
            written_instead(ZSCORE, submodule, std::iter::empty()),
            Some(hint)
        );
    }

    #[test]
    fn the_name_the_dropped_import_gave_gets_the_same_answer() {
        // The next turn dropped the import and kept the call.
        let code = ZSCORE.replace("from scipy import stats\n", "");
        let earlier = format!("Traceback (most recent call last):\n  ...\n{FAILED_IMPORT}");
        let error = "NameError: name 'stats' is not defined";
        let hint = written_instead(&code, error, [earlier.as_str()].into_iter()).unwrap();
        assert!(hint.calls.contains("x.std(ddof=0)"), "{hint:?}");
        // A function imported by name and called bare.
        let bare = "print(zscore(df['a']))";
        let error = "NameError: name 'zscore' is not defined";
        assert!(written_instead(bare, error, [earlier.as_str()].into_iter()).is_some());
        // The whole path kept, the import dropped (recorded too).
        let path = "insurance['z'] = scipy.stats.zscore(insurance['charges'])";
        let error = "NameError: name 'scipy' is not defined";
        assert!(written_instead(path, error, [earlier.as_str()].into_iter()).is_some());
    }

    #[test]
    fn calls_are_read_through_the_names_the_imports_give() {
        let aliased = "import numpy as np, scipy.stats as st\nprint(st.skew(df['a']))";
        let hint = written_instead(aliased, FAILED_IMPORT, std::iter::empty()).unwrap();
        assert!(hint.calls.starts_with("`skew(x)`"), "{hint:?}");
        let named = "from scipy.stats import (norm, zscore)\np = norm.cdf(zscore(x))";
        let hint = written_instead(named, FAILED_IMPORT, std::iter::empty()).unwrap();
        assert!(
            hint.calls.contains("`norm.cdf(z)`") && hint.calls.contains("`zscore(x)`"),
            "{hint:?}"
        );
        // pandas' own methods of the same name are not scipy's.
        let pandas = "from scipy import stats\nz = stats.zscore(df['a'])\nm = df['a'].mode()[0]";
        let hint = written_instead(pandas, FAILED_IMPORT, std::iter::empty()).unwrap();
        assert!(!hint.calls.contains("mode"), "{hint:?}");
    }

    #[test]
    fn nothing_is_said_where_the_library_was_never_missing_or_nothing_is_listed() {
        let code = ZSCORE.replace("from scipy import stats\n", "");
        let error = "NameError: name 'stats' is not defined";
        // No earlier block failed on scipy: the name may be anything.
        assert_eq!(written_instead(&code, error, std::iter::empty()), None);
        let other = "NameError: name 'insurance_df' is not defined";
        let earlier = FAILED_IMPORT;
        assert_eq!(written_instead(&code, other, [earlier].into_iter()), None);
        // A call nothing here stands in for (a fit scipy alone does).
        let fit = "from scipy.optimize import curve_fit\npopt, _ = curve_fit(f, x, y)";
        assert_eq!(
            written_instead(fit, FAILED_IMPORT, std::iter::empty()),
            None
        );
        // Another package's table is not read.
        let sklearn = "ModuleNotFoundError: No module named 'sklearn'";
        assert_eq!(written_instead(ZSCORE, sklearn, std::iter::empty()), None);
    }

    #[test]
    fn an_import_nothing_uses_is_dropped_and_one_in_use_is_kept() {
        // Recorded: z-scores computed with pandas, scipy imported again.
        let code = "import pandas as pd\nfrom scipy import stats\n\
                    z = (x - x.mean()) / x.std(ddof=0)\nprint(z)";
        let (without, import) = without_unused_import(code, FAILED_IMPORT).unwrap();
        assert_eq!(
            without,
            "import pandas as pd\nz = (x - x.mean()) / x.std(ddof=0)\nprint(z)"
        );
        assert_eq!(import, "from scipy import stats");
        // `stats` is called: the import is the failure to fix, not to drop.
        assert_eq!(without_unused_import(ZSCORE, FAILED_IMPORT), None);
        // A line that imports another package too stays.
        let shared = "import numpy as np, scipy\nprint(np.pi)";
        assert_eq!(without_unused_import(shared, FAILED_IMPORT), None);
        // Only a missing module's failure.
        let other = "NameError: name 'stats' is not defined";
        assert_eq!(without_unused_import(code, other), None);
        // A word that holds the name is not a use of it.
        let statistics = "from scipy import stats\nstatsmodel = 1";
        assert_eq!(
            without_unused_import(statistics, FAILED_IMPORT).map(|(code, _)| code),
            Some("statsmodel = 1".to_owned())
        );
    }

    #[test]
    fn a_call_is_told_from_a_longer_name_and_from_an_attribute() {
        assert_eq!(calls("my_zscore(x)", "zscore").count(), 0);
        assert_eq!(
            calls("→stats.zscore(x)", "zscore").collect::<Vec<_>>(),
            [Some("stats")]
        );
        assert_eq!(calls("zscores = 1", "zscore").count(), 0);
        assert_eq!(
            calls("a = stats.zscore (x)", "zscore").collect::<Vec<_>>(),
            [Some("stats")]
        );
        assert_eq!(
            calls("a = scipy.stats.zscore(x)", "zscore").collect::<Vec<_>>(),
            [Some("scipy.stats")]
        );
        assert_eq!(
            calls("p = norm.cdf(z)", "norm.cdf").collect::<Vec<_>>(),
            [None]
        );
        let scaled = "from sklearn.preprocessing import MinMaxScaler\n\
                      df[['a']] = MinMaxScaler().fit_transform(df[['a']])";
        let hint = written_instead(
            scaled,
            "ModuleNotFoundError: No module named 'sklearn'",
            std::iter::empty(),
        )
        .unwrap();
        assert!(
            hint.calls.contains("(x - x.min()) / (x.max() - x.min())"),
            "{hint:?}"
        );
    }
}
