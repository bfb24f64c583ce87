//! Well-known mistakes read from a block's code beside what it made, each
//! wrong whatever the request says: `len()` of a boolean mask counts every
//! row it covers, not the rows that matched.

use crate::agent::run::Execution;

/// A count taken with `len()` of a boolean mask: the mask's name and length.
#[derive(Debug, PartialEq)]
pub struct MaskLength {
    pub mask: String,
    pub rows: String,
}

/// The first `len(mask)` in the code of `executions` whose `mask` their
/// change lines describe as a boolean Series or array
/// (`outliers: Series shape (16683,) dtype bool (new)`).
pub fn length_of_a_mask(executions: &[Execution]) -> Option<MaskLength> {
    let masks: Vec<(&str, &str)> = executions
        .iter()
        .flat_map(|e| e.changes.iter())
        .filter_map(|line| {
            let (name, about) = line.split_once(": ")?;
            let shape = about
                .strip_prefix("Series shape (")
                .or_else(|| about.strip_prefix("ndarray shape ("))?;
            let (rows, rest) = shape.split_once(",)")?;
            rest.starts_with(" dtype bool").then_some((name, rows))
        })
        .collect();
    executions.iter().find_map(|e| {
        e.code.split("len(").skip(1).find_map(|after| {
            let name = after.split(')').next()?.trim();
            let (mask, rows) = masks.iter().find(|(mask, _)| *mask == name)?;
            Some(MaskLength {
                mask: (*mask).to_owned(),
                rows: (*rows).to_owned(),
            })
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ran(code: &str, changes: &[&str]) -> Execution {
        Execution {
            changes: changes.iter().map(|c| (*c).to_owned()).collect(),
            ..crate::agent::script::ok(code)
        }
    }

    #[test]
    fn the_length_of_a_boolean_mask_is_found() {
        // As the local model counted outliers on a DABench table.
        let code = "outliers = z.abs() > 3\nanswers['outlier_count'] = len(outliers)";
        let made = ["outliers: Series shape (16683,) dtype bool (new)"];
        assert_eq!(
            length_of_a_mask(&[ran(code, &made)]),
            Some(MaskLength {
                mask: "outliers".into(),
                rows: "16683".into()
            })
        );
        let array = ["hits: ndarray shape (40,) dtype bool (new)"];
        assert!(length_of_a_mask(&[ran("n = len( hits )", &array)]).is_some());
    }

    #[test]
    fn other_lengths_and_counts_of_a_mask_are_not() {
        let made = ["outliers: Series shape (16683,) dtype bool (new)"];
        let counted = "n = outliers.sum()\nrows = len(df)";
        assert_eq!(length_of_a_mask(&[ran(counted, &made)]), None);
        let filtered = "n = len(df[outliers])";
        assert_eq!(length_of_a_mask(&[ran(filtered, &made)]), None);
        let numbers = ["z: Series shape (16683,) dtype float64 (new)"];
        assert_eq!(length_of_a_mask(&[ran("n = len(z)", &numbers)]), None);
    }
}
