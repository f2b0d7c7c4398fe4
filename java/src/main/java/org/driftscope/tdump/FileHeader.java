package org.driftscope.tdump;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/** The file header (docs/format.md §2.1) with the run metadata in file order. */
public final class FileHeader {
  int versionMajor;
  int versionMinor;
  long salt;
  int requiredFeatures;
  int optionalFeatures;
  int headerLength;
  final List<String[]> metadata = new ArrayList<>();

  public int versionMajor() {
    return versionMajor;
  }

  public int versionMinor() {
    return versionMinor;
  }

  public long salt() {
    return salt;
  }

  public int requiredFeatures() {
    return requiredFeatures;
  }

  public int optionalFeatures() {
    return optionalFeatures;
  }

  public int headerLength() {
    return headerLength;
  }

  /** {key, value} pairs in file order. */
  public List<String[]> metadata() {
    List<String[]> out = new ArrayList<>();
    for (String[] kv : metadata) out.add(kv.clone());
    return Collections.unmodifiableList(out);
  }

  /** The value of a metadata key, or null. */
  public String get(String key) {
    for (String[] kv : metadata) {
      if (kv[0].equals(key)) return kv[1];
    }
    return null;
  }
}
