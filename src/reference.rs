//! The book's reference pages, made from the code so they cannot drift:
//! every `mahtab` subcommand with clap's help for it, and every magic and
//! `%%ask` option with the parser's own usage lines and help. A unit test
//! compares them with `docs/src/cli-reference.md` and
//! `docs/src/magics-reference.md`; `MAHTAB_BLESS=1 cargo test --lib
//! reference` writes them anew.

use clap::CommandFactory;

use crate::agent::config::options::{AskOptions, CODE_USAGE, CONFIG_USAGE, GRAPH_USAGE, USAGE};

/// What heads a generated page.
const GENERATED: &str = "<!-- Generated from the code by src/reference.rs: \
MAHTAB_BLESS=1 cargo test --lib reference writes it anew. -->";

/// The page of the `mahtab` command and its subcommands.
pub fn cli_page() -> String {
    let mut command = crate::cli::command();
    command.build();
    let mut page = format!(
        "# The mahtab command\n\n{GENERATED}\n\n```text\n{}\n```\n",
        help_text(&mut command)
    );
    let names: Vec<String> = command
        .get_subcommands()
        .filter(|sub| !sub.is_hide_set() && sub.get_name() != "help")
        .map(|sub| sub.get_name().to_owned())
        .collect();
    for name in names {
        let Some(sub) = command.find_subcommand_mut(&name) else {
            continue;
        };
        page.push_str(&format!(
            "\n## mahtab {name}\n\n```text\n{}\n```\n",
            help_text(sub)
        ));
    }
    page
}

/// The page of the agent's magics and every `%%ask` option.
pub fn magics_page() -> String {
    let mut page = format!("# Magics and %%ask options\n\n{GENERATED}\n\n## The magics\n\n");
    for usage in [USAGE, CONFIG_USAGE, GRAPH_USAGE, CODE_USAGE, UNDO_USAGE] {
        page.push_str(&format!("```text\n{}\n```\n\n", usage.trim_end()));
    }
    page.push_str(
        "## %%ask options\n\nOn the `%%ask` line, as `%ask_config` defaults (the ones that are \
         not per-cell switches), and as `ask()` keyword arguments (dashes become underscores).\n\n\
         | option | what it does |\n|---|---|\n",
    );
    for (flag, help) in ask_options() {
        page.push_str(&format!("| `{flag}` | {} |\n", help.replace('|', "\\|")));
    }
    page
}

/// `%ask_undo`'s usage (the Python side serves it; its error says the same).
const UNDO_USAGE: &str = "usage: %ask_undo [N]\n(puts back what the last N agent runs changed)";

/// Each `%%ask` option as written (`--max-turns <MAX_TURNS>`) and its help.
pub fn ask_options() -> Vec<(String, String)> {
    let mut command = AskOptions::command();
    command.build();
    command
        .get_arguments()
        .filter(|arg| !arg.is_hide_set())
        .filter_map(|arg| {
            let long = arg.get_long()?;
            let takes_value = arg.get_num_args().is_some_and(|n| n.takes_values());
            let value = match arg.get_value_names() {
                Some(names) => names.join(" "),
                None => arg.get_id().as_str().to_uppercase(),
            };
            let flag = if takes_value {
                format!("--{long} <{value}>")
            } else {
                format!("--{long}")
            };
            let help = arg
                .get_long_help()
                .or(arg.get_help())
                .map(|help| {
                    help.to_string()
                        .split_whitespace()
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .unwrap_or_default();
            Some((flag, help))
        })
        .collect()
}

fn help_text(command: &mut clap::Command) -> String {
    let text = command.render_long_help().to_string();
    text.lines()
        .map(str::trim_end)
        .collect::<Vec<_>>()
        .join("\n")
        .trim_end()
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `page` is what `file` holds, or with MAHTAB_BLESS=1 becomes it.
    fn matches_the_book(file: &str, page: &str) {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("docs/src")
            .join(file);
        if std::env::var_os("MAHTAB_BLESS").is_some() {
            std::fs::write(&path, page).unwrap();
        }
        let book = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            book == page,
            "{file} is not what the code says: run MAHTAB_BLESS=1 cargo test --lib reference \
             and commit the page"
        );
    }

    #[test]
    fn the_book_has_every_subcommand_as_the_code_has_it() {
        let page = cli_page();
        for name in ["kernel", "install", "export", "mcp", "local-model"] {
            assert!(page.contains(&format!("\n## mahtab {name}\n")), "{name}");
        }
        matches_the_book("cli-reference.md", &page);
    }

    #[test]
    fn the_book_has_every_ask_option_each_with_what_it_does() {
        let options = ask_options();
        for (flag, help) in &options {
            assert!(
                !help.is_empty(),
                "{flag} has no help: give its field a doc comment"
            );
        }
        for flag in [
            "--model <MODEL>",
            "--fresh",
            "--replay <REPLAY>",
            "--graph <GRAPH>",
        ] {
            assert!(
                options.iter().any(|(f, _)| f == flag),
                "{flag}: {options:?}"
            );
        }
        matches_the_book("magics-reference.md", &magics_page());
    }
}
