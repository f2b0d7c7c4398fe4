package org.driftscope.tdump;

/** What a tensor is to the module that produced it (docs/format.md §3.3 {@code role}). */
public enum Role {
  OUTPUT, INPUT, PARAMETER, OTHER;

  /** The on-disk value 0 … 3. */
  public int code() {
    return ordinal();
  }

  /** "output", "input", "parameter" or "other". */
  @Override
  public String toString() {
    return name().toLowerCase(java.util.Locale.ROOT);
  }

  public static Role fromCode(int code) {
    return code >= 0 && code < 4 ? values()[code] : null;
  }

  /** The role of its name, or null. */
  public static Role parse(String name) {
    for (Role r : values()) {
      if (r.toString().equals(name)) return r;
    }
    return null;
  }
}
