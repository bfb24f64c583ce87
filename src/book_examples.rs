//! Tests that the examples of the README and the book (`docs/src`) are
//! what the code accepts: each settings file parses as the kernel reads it
//! and names every key the code knows, each `%%ask` or `%ask_config` cell
//! parses with the magic's own parser, and each `mahtab` command line (in
//! a shell block or an MCP client's JSON) parses with the command's own
//! definition. `tests/python/unit/test_docs.py` checks the other shell
//! commands and runs the Python cells; a block marked `illustration` in its
//! info string (```` ```sh,illustration ````) is only shown.

use std::path::{Path, PathBuf};

use crate::agent::config::file::ConfigFile;
use crate::agent::config::options::parse_cell;

/// A fenced code block of a page.
#[derive(Debug)]
struct Block {
    page: String,
    /// Its info string's words (language first).
    info: Vec<String>,
    text: String,
}

impl Block {
    fn language(&self) -> &str {
        self.info.first().map(String::as_str).unwrap_or_default()
    }

    fn shown_only(&self) -> bool {
        self.info.iter().any(|word| word == "illustration")
    }
}

fn pages() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pages: Vec<PathBuf> = std::fs::read_dir(root.join("docs/src"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    pages.push(root.join("README.md"));
    pages
}

fn blocks(page: &Path) -> Vec<Block> {
    let text = std::fs::read_to_string(page).unwrap();
    let name = page.file_name().unwrap().to_string_lossy().into_owned();
    let mut blocks = Vec::new();
    let mut open: Option<Block> = None;
    for line in text.lines() {
        match (open.take(), line.strip_prefix("```")) {
            (None, Some(info)) => {
                open = Some(Block {
                    page: name.clone(),
                    info: info
                        .split([',', ' '])
                        .filter(|w| !w.is_empty())
                        .map(str::to_owned)
                        .collect(),
                    text: String::new(),
                });
            }
            (Some(block), Some(_)) => blocks.push(block),
            (Some(mut block), None) => {
                block.text.push_str(line);
                block.text.push('\n');
                open = Some(block);
            }
            (None, None) => {}
        }
    }
    assert!(open.is_none(), "{name}: a code block is never closed");
    blocks
}

fn all_blocks() -> Vec<Block> {
    pages().iter().flat_map(|page| blocks(page)).collect()
}

/// The shell commands of a block: continuation lines joined, comments and
/// leading `NAME=value` settings dropped, each split into words.
fn commands(text: &str) -> Vec<Vec<String>> {
    let joined = text.replace("\\\n", " ");
    joined
        .lines()
        .map(|line| match line.find(" #") {
            Some(at) => &line[..at],
            None => line,
        })
        .filter(|line| !line.trim().is_empty() && !line.trim_start().starts_with('#'))
        .map(|line| {
            words(line)
                .into_iter()
                .skip_while(|word| {
                    word.split_once('=').is_some_and(|(name, _)| {
                        name.chars().all(|c| c.is_ascii_uppercase() || c == '_')
                    })
                })
                .collect()
        })
        .collect()
}

/// The words of a shell command line: split at blanks outside quotes, the
/// quotes removed (no expansions: the book's commands need none).
fn words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut quote: Option<char> = None;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.get_or_insert_default().push(c),
            (None, '"' | '\'') => {
                quote = Some(c);
                word.get_or_insert_default();
            }
            (None, c) if c.is_whitespace() => words.extend(word.take()),
            (None, c) => word.get_or_insert_default().push(c),
        }
    }
    words.extend(word);
    words
}

/// Whether `mahtab` parses `args` (its own name first) as a command line.
fn mahtab_accepts(args: &[String]) -> Result<(), String> {
    crate::cli::command()
        .try_get_matches_from(args)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// The field names serde lists for an unknown key in `table` of a
/// settings file: the keys the code knows there.
fn known_keys(table: &str) -> Vec<String> {
    let probe = match table {
        "" => "no_such_key_here = 1\n".to_owned(),
        "prices" => "[prices]\nm = { no_such_key_here = 1 }\n".to_owned(),
        table => format!("[{table}]\nno_such_key_here = 1\n"),
    };
    let error = ConfigFile::parse(&probe).unwrap_err();
    let listed = error
        .split_once("expected one of ")
        .or_else(|| error.split_once("expected "))
        .unwrap_or_else(|| panic!("{table}: {error}"))
        .1;
    listed
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_code_block_names_its_language() {
    for block in all_blocks() {
        assert!(
            !block.language().is_empty(),
            "{}: a code block without a language:\n{}",
            block.page,
            block.text
        );
    }
}

#[test]
fn the_settings_example_parses_and_has_every_key_the_code_knows() {
    let examples: Vec<Block> = all_blocks()
        .into_iter()
        .filter(|b| b.language() == "toml" && !b.shown_only())
        .collect();
    assert!(examples.iter().any(|b| b.page == "settings.md"));
    for example in &examples {
        if let Err(e) = ConfigFile::parse(&example.text) {
            panic!("{}: the settings example does not parse: {e}", example.page);
        }
    }
    let settings = examples.iter().find(|b| b.page == "settings.md").unwrap();
    let sets = |table: &str, key: &str| {
        let mut in_table = table.is_empty();
        for line in settings.text.lines() {
            if let Some(name) = line.strip_prefix('[') {
                in_table = name.split(']').next() == Some(table);
            } else if in_table
                && (line.split(['=', ' ']).next() == Some(key)
                    || line.contains(&format!(" {key} =")))
            {
                return true;
            }
        }
        false
    };
    for table in ["", "openai", "anthropic", "claude", "prices"] {
        let keys = known_keys(table);
        assert!(!keys.is_empty(), "{table}");
        for key in keys {
            let documented = sets(table, &key)
                || (table.is_empty() && settings.text.contains(&format!("[{key}]")));
            assert!(
                documented,
                "the settings file's key `{key}` ({}) is missing from the example in settings.md",
                if table.is_empty() { "top level" } else { table }
            );
        }
    }
}

#[test]
fn the_key_list_comes_from_the_code() {
    let top = known_keys("");
    for key in ["provider", "replay", "openai", "prices"] {
        assert!(top.contains(&key.to_owned()), "{key}: {top:?}");
    }
    assert_eq!(known_keys("claude"), ["bin", "agent"]);
}

#[test]
fn every_agent_cell_of_the_book_parses() {
    let mut cells = 0;
    for block in all_blocks() {
        if block.shown_only() || !["ipython", "python"].contains(&block.language()) {
            continue;
        }
        let Some(parsed) = parse_cell(&block.text) else {
            continue;
        };
        cells += 1;
        if let Err(e) = parsed {
            panic!(
                "{}: this cell does not parse: {e:?}\n{}",
                block.page, block.text
            );
        }
    }
    assert!(cells > 0, "no %%ask cell found in the book or the README");
}

#[test]
fn every_mahtab_command_line_of_the_book_parses() {
    let mut lines = 0;
    // (Blocks marked `illustration` too: a cluster's commands cannot run
    // here, but the mahtab command lines among them can be parsed.)
    for block in all_blocks() {
        let mut found: Vec<Vec<String>> = Vec::new();
        match block.language() {
            "sh" => {
                for words in commands(&block.text) {
                    // A command that starts mahtab, possibly through another
                    // program (`claude mcp add NAME -- mahtab mcp ...`).
                    let after = words.iter().rposition(|w| w == "--").map_or(0, |i| i + 1);
                    let start = words[after..]
                        .iter()
                        .position(|w| w == "mahtab" || w.ends_with("/mahtab"))
                        .map(|i| i + after);
                    if let Some(start) = start {
                        found.push(words[start..].to_vec());
                    }
                }
            }
            "json" => {
                let value: serde_json::Value = serde_json::from_str(&block.text)
                    .unwrap_or_else(|e| panic!("{}: invalid JSON: {e}", block.page));
                collect_mahtab_servers(&value, &mut found);
            }
            _ => {}
        }
        for args in found {
            lines += 1;
            if let Err(e) = mahtab_accepts(&args) {
                panic!(
                    "{}: `{}` is not a mahtab command line: {e}",
                    block.page,
                    args.join(" ")
                );
            }
        }
    }
    assert!(lines >= 3, "only {lines} mahtab command lines found");
}

/// The command lines of MCP server entries (`"command": "mahtab"` with `args`).
fn collect_mahtab_servers(value: &serde_json::Value, found: &mut Vec<Vec<String>>) {
    match value {
        serde_json::Value::Object(map) => {
            if map.get("command").and_then(|c| c.as_str()) == Some("mahtab")
                && let Some(args) = map.get("args").and_then(|a| a.as_array())
            {
                let mut line = vec!["mahtab".to_owned()];
                line.extend(args.iter().filter_map(|a| a.as_str()).map(str::to_owned));
                found.push(line);
            }
            map.values().for_each(|v| collect_mahtab_servers(v, found));
        }
        serde_json::Value::Array(items) => {
            items.iter().for_each(|v| collect_mahtab_servers(v, found));
        }
        _ => {}
    }
}

#[test]
fn command_lines_are_split_as_a_shell_would() {
    let text = "FOO=1 BAR=\"x y\" mahtab install \\\n    --prefix '/p q'   # a comment\n# only a comment\n";
    assert_eq!(commands(text), [["mahtab", "install", "--prefix", "/p q"]]);
    assert!(mahtab_accepts(&["mahtab".into(), "install".into(), "--no-such".into()]).is_err());
}

#[test]
fn help_and_usage_errors_name_pages_that_are_there() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut help = crate::cli::command();
    let texts = [
        crate::agent::config::options::MAGICS_PAGE.to_owned(),
        help.render_long_help().to_string(),
    ];
    for text in texts {
        let named: Vec<&str> = text
            .split_whitespace()
            .filter(|word| word.starts_with("docs/src/"))
            .map(|word| word.trim_end_matches([',', '.', ';', ')']))
            .collect();
        assert!(!named.is_empty(), "no page named in: {text}");
        for page in named {
            assert!(root.join(page).is_file(), "{page} is not there");
        }
    }
}
