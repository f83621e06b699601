//! Putting together the whole answers of a read run on several shards
//! ([`super::plan::Gather`]): rows with equal group keys combined into one, aggregates
//! combined exactly, the rows sorted as the server sorts them, the offset skipped and
//! the limit kept, the columns only the shards were asked for dropped. Pure: the
//! session reads and writes the packets.

use super::merge::{combine, exact, Agg, Compare, Num, OrderKey};
use super::plan::{Column, Gather};
use std::cmp::Ordering;

/// A column of the shards' answers, as its definition describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnInfo {
    /// The name the client sees, lowercased.
    pub name: Vec<u8>,
    pub column_type: u8,
    /// The collation id (63: binary).
    pub charset: u16,
}

/// A text row's values.
pub type Row = Vec<Option<Vec<u8>>>;

const NOT_EXACT: &str =
    "an aggregate over several shards of a column that is not an integer or a decimal";
const TOO_LARGE: &str = "an aggregate too large to combine exactly";

/// The rows the client gets, from every shard's rows (`defs` describing their columns).
/// `Err` names why they could not be put together exactly.
pub fn put_together(
    g: &Gather,
    defs: &[ColumnInfo],
    rows: Vec<Row>,
) -> Result<Vec<Row>, &'static str> {
    let columns = match g.columns.is_empty() {
        true => vec![Column::Plain; defs.len()],
        false => g.columns.clone(),
    };
    let shown = defs.len().checked_sub(g.hidden);
    let Some(shown) = shown.filter(|_| columns.len() == defs.len()) else {
        return Err("a read over several shards whose columns were not the ones asked for");
    };
    if rows.iter().any(|r| r.len() != defs.len()) {
        return Err("a row Sluice could not read");
    }
    let mut rows = match &g.group {
        Some(keys) => groups(keys, &columns, defs, rows)?,
        None => rows,
    };
    if !g.order.is_empty() {
        let keys = order_keys(&g.order, &defs[..shown])?;
        // Stable: rows the ORDER BY ties keep their group order.
        rows.sort_by(|a, b| compare(&keys, a, b));
    }
    let offset = usize::try_from(g.offset).unwrap_or(usize::MAX);
    let limit = g
        .limit
        .map_or(usize::MAX, |l| usize::try_from(l).unwrap_or(usize::MAX));
    Ok(rows
        .into_iter()
        .skip(offset)
        .take(limit)
        .map(|mut r| {
            r.truncate(shown);
            r
        })
        .collect())
}

/// Sort keys: (column, how its values compare, descending).
type Keys = Vec<(usize, Compare, bool)>;

fn compare(keys: &Keys, a: &Row, b: &Row) -> Ordering {
    keys.iter()
        .map(|&(i, c, desc)| {
            let o = c.cmp(a[i].as_deref(), b[i].as_deref());
            if desc {
                o.reverse()
            } else {
                o
            }
        })
        .find(|o| o.is_ne())
        .unwrap_or(Ordering::Equal)
}

fn order_keys(order: &[(OrderKey, bool)], defs: &[ColumnInfo]) -> Result<Keys, &'static str> {
    const COLLATION: &str =
        "ORDER BY over several shards on a column whose order depends on its collation";
    let mut keys = Vec::new();
    for (key, desc) in order {
        let index = match key {
            OrderKey::Position(p) => p.checked_sub(1).filter(|&i| i < defs.len()),
            OrderKey::Name(n) => defs.iter().position(|d| d.name == n.as_bytes()),
        }
        .ok_or("ORDER BY over several shards on a column the result does not show")?;
        let c = Compare::of(defs[index].column_type, defs[index].charset).ok_or(COLLATION)?;
        keys.push((index, c, *desc));
    }
    Ok(keys)
}

/// The rows combined by their values in the `keys` columns, in the order the server
/// gives its groups (by the keys, ascending unless said otherwise).
fn groups(
    keys: &[(usize, bool)],
    columns: &[Column],
    defs: &[ColumnInfo],
    mut rows: Vec<Row>,
) -> Result<Vec<Row>, &'static str> {
    const COLLATION: &str =
        "GROUP BY over several shards on a column whose values compare under a collation";
    for (c, d) in columns.iter().zip(defs) {
        let ok = match c {
            Column::Plain => true,
            Column::Agg(_) | Column::Part(_) => exact(d.column_type),
            // NEWDECIMAL: an AVG of a float is a double, whose digits depend on the
            // order of additions.
            Column::Avg { .. } => d.column_type == 246,
        };
        if !ok {
            return Err(NOT_EXACT);
        }
    }
    let mut sort = Keys::new();
    for &(i, desc) in keys {
        let d = defs.get(i).ok_or(COLLATION)?;
        sort.push((
            i,
            Compare::of(d.column_type, d.charset).ok_or(COLLATION)?,
            desc,
        ));
    }
    rows.sort_by(|a, b| compare(&sort, a, b));
    let mut out = Vec::new();
    let mut current: Option<Group> = None;
    for row in rows {
        match &mut current {
            Some(g) if compare(&sort, &g.first, &row).is_eq() => g.add(columns, &row)?,
            _ => {
                if let Some(g) = current.take() {
                    out.push(g.finish(columns)?);
                }
                let mut g = Group::new(columns.len(), row.clone());
                g.add(columns, &row)?;
                current = Some(g);
            }
        }
    }
    match current {
        Some(g) => out.push(g.finish(columns)?),
        // Aggregates with no GROUP BY over no rows still make one row.
        None if keys.is_empty() => {
            out.push(Group::new(columns.len(), vec![None; columns.len()]).finish(columns)?)
        }
        None => {}
    }
    Ok(out)
}

/// One group's rows so far.
struct Group {
    /// Its first row: the keys, and what is shown as it is.
    first: Row,
    /// Each aggregate column combined so far (`None`: no value yet).
    values: Vec<Option<Num>>,
    /// Each `AVG` column's scale, as a shard's value shows it.
    scales: Vec<Option<u32>>,
}

impl Group {
    fn new(width: usize, first: Row) -> Group {
        Group {
            first,
            values: vec![None; width],
            scales: vec![None; width],
        }
    }

    fn add(&mut self, columns: &[Column], row: &Row) -> Result<(), &'static str> {
        for (i, c) in columns.iter().enumerate() {
            let Some(text) = row[i].as_deref() else {
                continue;
            };
            let parsed = || Num::parse(text).ok_or("an aggregate value that is not a number");
            match *c {
                Column::Plain => {}
                Column::Agg(agg) | Column::Part(agg) => {
                    let n = parsed()?;
                    self.values[i] = Some(match self.values[i] {
                        None => n,
                        Some(acc) => combine(agg, acc, n).ok_or(TOO_LARGE)?,
                    });
                }
                Column::Avg { .. } => self.scales[i] = Some(parsed()?.scale()),
            }
        }
        Ok(())
    }

    fn finish(self, columns: &[Column]) -> Result<Row, &'static str> {
        let mut row = self.first;
        for (i, c) in columns.iter().enumerate() {
            row[i] = match *c {
                Column::Plain => continue,
                Column::Agg(Agg::Count) | Column::Part(Agg::Count) => {
                    Some(self.values[i].map_or(b"0".to_vec(), Num::text))
                }
                Column::Agg(_) | Column::Part(_) => self.values[i].map(Num::text),
                Column::Avg { sum, count } => {
                    let count = self.values.get(count).copied().flatten();
                    match count.and_then(Num::integer).filter(|&c| c > 0) {
                        None => None,
                        Some(n) => {
                            let sum = self.values.get(sum).copied().flatten();
                            let (Some(sum), Some(scale)) = (sum, self.scales[i]) else {
                                return Err("an AVG over several shards Sluice could not compute");
                            };
                            Some(Num::average(sum, n, scale).ok_or(TOO_LARGE)?.text())
                        }
                    }
                }
            };
        }
        Ok(row)
    }
}
