package org.driftscope.tdump;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/** What a scan of the whole file found (docs/format.md §4). */
public final class Integrity {
  /** The verdict on a file. */
  public enum State {
    /** Every record valid, the last one is END. */
    CLEAN,
    /** Every record valid, no END (the run crashed or is still running): not an error. */
    UNFINISHED,
    /** The last record is incomplete (a torn tail): every record before it is returned. */
    CUT,
    /** A record failed a check: {@link #corruption()} names the first failure. */
    CORRUPT;

    @Override
    public String toString() {
      return name().toLowerCase(java.util.Locale.ROOT);
    }
  }

  State state = State.CLEAN;
  long fileSize;
  long validEnd;
  long dataEnd;
  long cutOffset = TdumpException.NO_OFFSET;
  long discardedBytes;
  TdumpException corruption;
  String corruptName = "";
  final List<TdumpException> warnings = new ArrayList<>();
  boolean indexUsed;
  boolean checksumsVerified;

  public State state() {
    return state;
  }

  public long fileSize() {
    return fileSize;
  }

  /** Offset just past the last valid record. */
  public long validEnd() {
    return validEnd;
  }

  /** Offset just past the last valid record that is not INDEX or END (where an append continues). */
  public long dataEnd() {
    return dataEnd;
  }

  /** Start of the torn record (cut only), else {@link TdumpException#NO_OFFSET}. */
  public long cutOffset() {
    return cutOffset;
  }

  /** Bytes from the cut to the end of the file. */
  public long discardedBytes() {
    return discardedBytes;
  }

  /** The first failure (corrupt only), else null. */
  public TdumpException corruption() {
    return corruption;
  }

  /** Tensor name of the failing record when its meta was readable that far, else "". */
  public String corruptName() {
    return corruptName;
  }

  /** Warnings such as duplicate_tensor, and the ranges skipped by resynchronisation. */
  public List<TdumpException> warnings() {
    return Collections.unmodifiableList(warnings);
  }

  /**
   * The footer index vouches for the scan (the file is clean and the index agreed with it entry by
   * entry and slot by slot). find() answers from an in-memory table either way (issue 23 item 4).
   */
  public boolean indexUsed() {
    return indexUsed;
  }

  /** Payload CRCs were checked for every record at open. */
  public boolean checksumsVerified() {
    return checksumsVerified;
  }

  public boolean finished() {
    return state == State.CLEAN;
  }

  public boolean damaged() {
    return state == State.CUT || state == State.CORRUPT;
  }
}
