//! Whether a request asks for a figure to be shown. A figure word alone is
//! not enough: questions written as prose use the same words for other
//! things ("I can't figure out how", "the points outside the whiskers of
//! the box plot"), and a run sent back for a figure nobody asked for plots
//! one. A figure is asked for where a sentence begins with it ("Plot
//! revenue", "A histogram of ages"), where it follows a word that asks
//! ("please plot", "to draw", "and then chart"), or where a verb of making
//! or showing comes just before it ("make a scatter plot", "show a bar
//! chart", "keep the figure").

use super::checks::sentences;

/// Words that name or draw a figure.
const FIGURE_WORDS: [&str; 10] = [
    "plot",
    "chart",
    "histogram",
    "figure",
    "scatter",
    "visualize",
    "visualise",
    "draw",
    "graph",
    "heatmap",
];

/// Verbs (and the prepositions of "with a plot", "as a chart", and the
/// "like" of "I'd like a chart") that make, show or keep what follows them.
const MAKING: [&str; 25] = [
    "make",
    "create",
    "show",
    "display",
    "draw",
    "generate",
    "produce",
    "render",
    "plot",
    "add",
    "build",
    "give",
    "want",
    "need",
    "include",
    "save",
    "keep",
    "visualize",
    "visualise",
    "use",
    "see",
    "like",
    "return",
    "with",
    "as",
];

/// Words after which a figure word is the verb being asked for.
const ASKING: [&str; 13] = [
    "to", "and", "then", "please", "also", "you", "can", "could", "would", "should", "must", "let",
    "s",
];

/// How many words before a figure word a verb of making may stand ("make
/// a nice scatter plot").
const MAKING_REACH: usize = 4;

/// How many words into a sentence a figure word still opens it ("A bar
/// chart of sales").
const OPENING: usize = 3;

fn is_figure_word(word: &str) -> bool {
    FIGURE_WORDS
        .iter()
        .any(|figure| word == *figure || word.strip_suffix('s') == Some(figure))
}

/// Whether `request` asks for a figure to be shown.
pub fn wants_figure(request: &str) -> bool {
    sentences(request).any(|sentence| {
        let words: Vec<String> = sentence
            .split(|c: char| !c.is_alphanumeric())
            .filter(|word| !word.is_empty())
            .map(str::to_lowercase)
            .collect();
        (0..words.len()).any(|i| asks_for_figure(&words, i))
    })
}

/// Whether `words[i]` is a figure word used to ask for one.
fn asks_for_figure(words: &[String], i: usize) -> bool {
    let word = words[i].as_str();
    if !is_figure_word(word) {
        return false;
    }
    // "figure out": work out, not a figure.
    if word.starts_with("figure") && words.get(i + 1).is_some_and(|next| next == "out") {
        return false;
    }
    let before = &words[i.saturating_sub(MAKING_REACH)..i];
    i < OPENING
        || before.iter().any(|w| MAKING.contains(&w.as_str()))
        || i > 0 && ASKING.contains(&words[i - 1].as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_asked_for_in_many_wordings_are_wanted() {
        for request in [
            "Plot revenue per month",
            "draw two histograms of qty",
            "Histogram of ages.",
            "Can you visualize the distribution of x?",
            "I want a bar chart of sales per region",
            "Load the data. Then make a nice scatter plot of a against b",
            "Use seaborn to draw a heatmap of the correlations",
            "Create a line graph of revenue",
            "I'd like a histogram of ages",
            "Compute the means and show them as a bar chart.",
            "Plot levels as a line with the title 'Levels', and keep the figure in `fig`.",
        ] {
            assert!(wants_figure(request), "{request}");
        }
    }

    #[test]
    fn figure_words_used_for_other_things_are_not_a_request_for_one() {
        for request in [
            "Store the total in `total`",
            "I am not able to figure out what to do in this case. Filter the rows \
             whose values are all below 1.",
            "Count the points located outside the whiskers of the box plot (a point is \
             an outlier when it is more than 1.5 IQR beyond the quartiles).",
            "Which rows did the previous step draw from the table?",
        ] {
            assert!(!wants_figure(request), "{request}");
        }
    }
}
