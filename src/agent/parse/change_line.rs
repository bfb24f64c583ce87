//! A block's change lines read back: which variable, how it is described,
//! and what the block did to it. The lines are written by
//! `mahtab/agent/namespace.py` (`namespace_changes`) and read by the model
//! and the review as they are, so their wording is for a reader; this is
//! the one place the kernel reads them.

/// What a block did to a variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// The name was not bound before the block.
    New,
    /// The name was bound to another object.
    Rebound,
    /// The object the name held before was changed itself.
    InPlace,
    /// The name was deleted.
    Deleted,
}

impl Change {
    /// How a line ends for this change (`namespace.py` writes the same).
    pub const fn suffix(self) -> &'static str {
        match self {
            Change::New => "(new)",
            Change::Rebound => "(changed)",
            Change::InPlace => "(changed in place)",
            Change::Deleted => "(deleted)",
        }
    }
}

/// One change line: `name: description (kind)`, or `name (deleted)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChangeLine<'a> {
    pub name: &'a str,
    /// The value as the line describes it (empty for a deleted name).
    pub description: &'a str,
    pub change: Change,
}

/// The change `line` tells of; None for a line that tells of none (`(and 3
/// more)`).
pub fn read(line: &str) -> Option<ChangeLine<'_>> {
    let line = line.trim_end();
    if let Some(name) = line.strip_suffix(Change::Deleted.suffix()) {
        let name = name.trim_end();
        return (!name.is_empty() && !name.contains(' ')).then_some(ChangeLine {
            name,
            description: "",
            change: Change::Deleted,
        });
    }
    let (name, rest) = line.split_once(": ")?;
    [Change::New, Change::Rebound, Change::InPlace]
        .into_iter()
        .find_map(|change| {
            let description = rest.strip_suffix(change.suffix())?;
            Some(ChangeLine {
                name,
                description: description.trim_end(),
                change,
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_of_line_reads_back_as_its_change() {
        let line = read("sales: DataFrame 4x4, columns a, b (new)").unwrap();
        assert_eq!(
            (line.name, line.description, line.change),
            ("sales", "DataFrame 4x4, columns a, b", Change::New)
        );
        let rebound = read("x: int = 2 (changed)").unwrap();
        assert_eq!((rebound.name, rebound.change), ("x", Change::Rebound));
        let in_place = read("items: list len 2 = [1, 2] (changed in place)").unwrap();
        assert_eq!(
            (in_place.description, in_place.change),
            ("list len 2 = [1, 2]", Change::InPlace)
        );
        let deleted = read("tmp (deleted)").unwrap();
        assert_eq!((deleted.name, deleted.change), ("tmp", Change::Deleted));
    }

    #[test]
    fn a_line_of_no_change_reads_as_none() {
        assert_eq!(read("(and 3 more)"), None);
        assert_eq!(read("just text"), None);
        // A value whose description ends in parentheses is not a change of that kind.
        assert_eq!(read("s: str = '(new)'"), None);
    }
}
