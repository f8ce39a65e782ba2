"""lakesort reader-side library."""
