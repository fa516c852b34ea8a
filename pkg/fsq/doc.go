// Package fsq holds the filesystem primitives the spool is built from.
//
// Every function here that says "durable" has reached the disk when it
// returns: files are fsynced before they are renamed into place, and the
// parent directory of every create, rename and remove is fsynced after it
// (renameio alone does not do the directory). Nothing here knows about jobs;
// pkg/job composes these primitives into transactions.
package fsq
