//! Lists scroll by pages: what the views draw and what a click lands on are counted
//! from the same page.

/// First visible item of a list of `height` rows with the cursor at `cursor`: lists
/// scroll by pages, so the view is stable while the cursor moves within a page.
pub(crate) fn list_offset(cursor: usize, height: usize) -> usize {
    if height == 0 {
        return 0;
    }
    (cursor / height) * height
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_shows_the_page_its_cursor_is_on() {
        assert_eq!(list_offset(0, 10), 0);
        assert_eq!(list_offset(9, 10), 0);
        assert_eq!(list_offset(10, 10), 10);
        assert_eq!(list_offset(5, 0), 0);
    }
}
