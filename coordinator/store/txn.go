package store

// markerObject is the object ID of the batch rows of transaction markers:
// no object holds them.
const markerObject = -1

// markerSize is the size of a transaction marker batch.
const markerSize = 78
