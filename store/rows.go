package store

// rowSet is what database/sql's and pgx's result sets share.
type rowSet interface {
	Next() bool
	Err() error
}

// collect scans every row of rows with scan (one loop for both databases and both record
// kinds); the caller closes rows.
func collect[R rowSet, T any](rows R, scan func(R) (T, error)) ([]T, error) {
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, dbErr(rows.Err())
}
