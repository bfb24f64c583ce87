//! Cutting text at byte positions without splitting a character (the
//! agent's budgets, MCP's bounded output).

/// The largest char boundary of `text` at or below `index` (its length if
/// `index` is past the end).
pub fn floor_char_boundary(text: &str, index: usize) -> usize {
    if index >= text.len() {
        return text.len();
    }
    (0..=index)
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0)
}

/// The smallest char boundary of `text` at or above `index` (its length if
/// `index` is past the end).
pub fn ceil_char_boundary(text: &str, index: usize) -> usize {
    (index..text.len())
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(text.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boundaries_never_split_a_character() {
        let text = "aé€b"; // 1 + 2 + 3 + 1 bytes
        assert_eq!(floor_char_boundary(text, 2), 1);
        assert_eq!(ceil_char_boundary(text, 2), 3);
        assert_eq!(floor_char_boundary(text, 4), 3);
        assert_eq!(ceil_char_boundary(text, 4), 6);
        assert_eq!(floor_char_boundary(text, 99), text.len());
        assert_eq!(ceil_char_boundary(text, 99), text.len());
    }
}
