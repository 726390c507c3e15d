package openapi

//go:generate go run ./internal/enumgen zz_generated_enums.go

// enumValue is one value of an enum type and its description line
// (" - `"ClusterIP"` means ...").
type enumValue struct {
	value, line string
}

// fieldMarker holds the comment markers of one struct field.
type fieldMarker struct {
	// def is the +default value as JSON ("" when there is none).
	listType, mapType, def string
	listMapKeys            []string
	optional               bool
}
