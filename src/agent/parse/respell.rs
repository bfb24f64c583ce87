//! A key the code spelled otherwise than the data does: `weather['wind_speed']`
//! on a table whose column is `wind speed`. The kernel's error line names the
//! close key (`close_names.py`: `KeyError: 'wind_speed'. Did you mean: 'wind
//! speed' (a column of weather)?`, or `KeyError: ['wind_speed']. Did you
//! mean: 'wind speed' for 'wind_speed' (...)?` where pandas raised the keys
//! in a list or a message; `tests/it/agent_code.rs` and `data_stack.rs`
//! hold the two sides together); when the two differ only in case, blanks
//! or punctuation (`wind_speed`, `1` for `#1`), the code meant that key, and the same code with
//! the data's spelling is what a fix would be. (A small model, told the
//! close key, measurably writes the old spelling again.) A key merely
//! similar (`total_sale` for `total_sales`) may be another thing and is left
//! to the model. The error line also names the block's other strings that
//! spell a key of the same table otherwise (`Also: 'Age' for 'age'.`): a
//! block that wrote one column in lower case most often wrote the next ones
//! so too, and each would cost a run of its own.
//!
//! The same for a Series method reached through a pandas accessor
//! (`df['A'].str.isin(...)`: `AttributeError: 'StringMethods' object has
//! no attribute 'isin'. Did you mean the Series's own .isin, without
//! .str?`, from `close_names.py`): the code meant the Series' method, and
//! the fix is the same code without the accessor there (the local model,
//! told the error, sent the same line three times).

/// The failed code with the data's spelling of its keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Respelling {
    /// Each key as the code wrote it, with the key as the data has it; the
    /// one the error was raised for first.
    pub keys: Vec<(String, String)>,
    /// The code with every quoted written key replaced by the data's.
    pub code: String,
}

/// The respelling of `code`, whose block failed with `error_line` (the
/// error's last line), if the error names a key that differs from the
/// written one only in its spelling.
pub fn respell(code: &str, error_line: &str) -> Option<Respelling> {
    let (raised, rest) = error_line
        .strip_prefix("KeyError: ")?
        .split_once(". Did you mean: '")?;
    let (key, rest) = rest.split_once('\'')?;
    // A key raised in a list or a pandas message is named after the
    // suggestion ("'wind speed' for 'wind_speed'"); one raised alone is
    // the key itself.
    let (written, rest) = match rest.strip_prefix(" for '") {
        Some(rest) => rest.split_once("' (")?,
        None => (raised.strip_prefix('\'')?.strip_suffix('\'')?, rest),
    };
    if !respellable(written, key) {
        return None;
    }
    let mut keys = vec![(written.to_owned(), key.to_owned())];
    keys.extend(
        also(rest)
            .into_iter()
            .filter(|(written, key)| respellable(written, key)),
    );
    let mut respelled = code.to_owned();
    for (written, key) in &keys {
        for quote in ['\'', '"'] {
            respelled = respelled.replace(
                &format!("{quote}{written}{quote}"),
                &format!("{quote}{key}{quote}"),
            );
        }
    }
    (respelled != code).then_some(Respelling {
        keys,
        code: respelled,
    })
}

/// The pairs after the suggestion: `... (a column of df)? Also: 'Age' for
/// 'age', 'Price' for 'price'.` as (written, key).
fn also(rest: &str) -> Vec<(String, String)> {
    let Some((_, listed)) = rest.split_once("? Also: ") else {
        return Vec::new();
    };
    let listed = listed.trim_end().strip_suffix('.').unwrap_or(listed);
    listed
        .split(", ")
        .filter_map(|pair| {
            let (key, written) = pair.split_once("' for '")?;
            Some((
                written.strip_suffix('\'')?.to_owned(),
                key.strip_prefix('\'')?.to_owned(),
            ))
        })
        .collect()
}

/// The failed code without the accessor its error line says the method
/// is not reached through: `(accessor, method, code)`, where the code has
/// `.{accessor}.{method}(`, each such call then on the value itself.
pub fn without_accessor(code: &str, error_line: &str) -> Option<(String, String, String)> {
    let (_, rest) = error_line.split_once("'s own .")?;
    let (method, rest) = rest.split_once(", without .")?;
    let accessor = rest.strip_suffix('?')?;
    let word = |text: &str| {
        !text.is_empty() && text.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    if !word(method) || !word(accessor) {
        return None;
    }
    let reached = format!(".{accessor}.{method}(");
    code.contains(&reached).then(|| {
        let direct = code.replace(&reached, &format!(".{method}("));
        (accessor.to_owned(), method.to_owned(), direct)
    })
}

/// Whether `written` is `key` spelled otherwise, and both can be quoted as
/// they stand.
fn respellable(written: &str, key: &str) -> bool {
    let plain = |text: &str| !text.is_empty() && !text.contains(['\'', '"', '\\']);
    // (Punctuation alone, `$` for `#`, spells no name.)
    plain(written)
        && plain(key)
        && written != key
        && !folded(key).is_empty()
        && folded(written) == folded(key)
}

/// A key without case, blanks or punctuation: its letters and digits.
fn folded(key: &str) -> String {
    key.chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    // The block and error line recorded from the 1.5B coder model on a
    // weather table (it wrote 'wind_speed' again after being told).
    const CODE: &str = "weather = pd.read_csv('weather_train.csv')\n\
                        z = (weather['wind_speed'] - weather[\"wind_speed\"].mean())\n\
                        print('wind_speed')";
    const ERROR: &str = "KeyError: 'wind_speed'. Did you mean: 'wind speed' (a column of weather)?";

    #[test]
    fn a_key_spelled_otherwise_is_respelled_everywhere_it_is_quoted() {
        let respelled = respell(CODE, ERROR).unwrap();
        assert_eq!(respelled.keys, [pair("wind_speed", "wind speed")]);
        assert_eq!(
            respelled.code,
            "weather = pd.read_csv('weather_train.csv')\n\
             z = (weather['wind speed'] - weather[\"wind speed\"].mean())\n\
             print('wind speed')"
        );
        let capitalised = "KeyError: 'age'. Did you mean: 'Age' (a column of people)?";
        assert_eq!(
            respell("people['age'].mean()", capitalised).unwrap().code,
            "people['Age'].mean()"
        );
    }

    #[test]
    fn a_key_pandas_raised_in_a_list_or_a_message_is_respelled_too() {
        // `dropna(subset=[...])` raises the list; `df[[...]]` a message.
        let code = "w = pd.read_csv('w.csv')\n\
                    w.dropna(subset=['wind_speed'], inplace=True)\n\
                    print(w['wind_speed'].skew())";
        let listed = "KeyError: ['wind_speed']. Did you mean: 'wind speed' for 'wind_speed' \
                      (a column of w)?";
        let respelled = respell(code, listed).unwrap();
        assert_eq!(respelled.keys, [pair("wind_speed", "wind speed")]);
        assert_eq!(
            respelled.code,
            "w = pd.read_csv('w.csv')\n\
             w.dropna(subset=['wind speed'], inplace=True)\n\
             print(w['wind speed'].skew())"
        );
        let message = "KeyError: \"['Age', 'wind_speed'] not in index\". Did you mean: \
                       'wind speed' for 'wind_speed' (a column of w)?";
        assert_eq!(
            respell("w[['Age', 'wind_speed']]", message).unwrap().code,
            "w[['Age', 'wind speed']]"
        );
    }

    #[test]
    fn the_blocks_other_keys_the_error_line_names_are_respelled_at_once() {
        // As close_names.py writes it for a block that wrote two columns
        // in lower case; a listed pair merely similar is left alone.
        let code = "a = df[df['category'] == 'Assault']\n\
                    q = a['age'].quantile(0.25)\n\
                    n = a['total_sale'].sum()";
        let error = "KeyError: 'category'. Did you mean: 'Category' (a column of df)? \
                     Also: 'Age' for 'age', 'total_sales' for 'total_sale'.";
        let respelled = respell(code, error).unwrap();
        assert_eq!(
            respelled.keys,
            [pair("category", "Category"), pair("age", "Age")]
        );
        assert_eq!(
            respelled.code,
            "a = df[df['Category'] == 'Assault']\n\
             q = a['Age'].quantile(0.25)\n\
             n = a['total_sale'].sum()"
        );
        // The pairs follow a key raised in a list too.
        let listed = "KeyError: ['wind_speed']. Did you mean: 'wind speed' for 'wind_speed' \
                      (a column of w)? Also: 'Time' for 'time'.";
        assert_eq!(
            respell("w[['time', 'wind_speed']]", listed).unwrap().code,
            "w[['Time', 'wind speed']]"
        );
    }

    #[test]
    fn a_series_method_reached_through_an_accessor_is_called_on_the_series() {
        // Recorded from the 1.5B coder model (ds1000, development split).
        let code = "result = df[df['A'].str.isin(['s', 'b'])]\nprint(result)";
        let error = "AttributeError: 'StringMethods' object has no attribute 'isin'. \
                     Did you mean the Series's own .isin, without .str?";
        assert_eq!(
            without_accessor(code, error),
            Some((
                "str".into(),
                "isin".into(),
                "result = df[df['A'].isin(['s', 'b'])]\nprint(result)".into()
            ))
        );
        // Another error, or the method not called so in the code: left to
        // the model.
        let plain = "AttributeError: 'StringMethods' object has no attribute 'isin'";
        assert_eq!(without_accessor(code, plain), None);
        assert_eq!(without_accessor("f = s.str.isin", error), None);
        let odd = "AttributeError: x. Did you mean the Series's own .is in, without .str?";
        assert_eq!(without_accessor(code, odd), None);
    }

    fn pair(written: &str, key: &str) -> (String, String) {
        (written.to_owned(), key.to_owned())
    }

    #[test]
    fn a_key_that_is_only_similar_or_not_in_the_code_is_left_to_the_model() {
        let similar = "KeyError: 'total_sale'. Did you mean: 'total_sales' (a key of d)?";
        assert_eq!(respell("d['total_sale']", similar), None);
        assert_eq!(respell("weather[column]", ERROR), None);
        assert_eq!(respell(CODE, "KeyError: 'wind_speed'"), None);
        let quoted = "KeyError: \"it's\". Did you mean: 'its' (a key of d)?";
        assert_eq!(respell("d[\"it's\"]", quoted), None);
        let punctuation = "KeyError: '$'. Did you mean: '#' (a column of df)?";
        assert_eq!(respell("df['$']", punctuation), None);
    }

    #[test]
    fn a_key_written_without_its_punctuation_is_respelled() {
        // DS-1000's table with the columns '#1' and '#2', read as '1'.
        let error = "KeyError: '1'. Did you mean: '#1' (a column of df)?";
        assert_eq!(
            respell("df.loc[0, '1'] = df.loc[1, '1']", error)
                .unwrap()
                .code,
            "df.loc[0, '#1'] = df.loc[1, '#1']"
        );
        // A whole number is left to the model: its digits are everywhere.
        let number = "KeyError: 1. Did you mean: '#1' (a column of df)?";
        assert_eq!(respell("df[1] = df[1] * 2", number), None);
    }
}
