package tributary.sql;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import javax.security.sasl.AuthenticationException;
import org.apache.hive.service.auth.PasswdAuthenticationProvider;

/**
 * HiveServer2 CUSTOM authentication with one shared secret: the password must equal the server process's
 * {@code TRIBUTARY_SQL_PASSWORD}; any user name is accepted. The secret never appears on a command line.
 */
public final class SharedSecretAuthenticator implements PasswdAuthenticationProvider {
  public static final String VARIABLE = "TRIBUTARY_SQL_PASSWORD";

  private final byte[] expected;

  public SharedSecretAuthenticator() {
    String secret = System.getenv(VARIABLE);
    if (secret == null || secret.isEmpty()) {
      throw new IllegalStateException(VARIABLE + " is not set in the SQL server's environment");
    }
    expected = digest(secret);
  }

  private static byte[] digest(String text) {
    try {
      return MessageDigest.getInstance("SHA-256").digest(text.getBytes(StandardCharsets.UTF_8));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  @Override
  public void Authenticate(String user, String password) throws AuthenticationException {
    // Equal-length digests compared in constant time: the comparison leaks nothing about the secret.
    if (password == null || !MessageDigest.isEqual(digest(password), expected)) {
      throw new AuthenticationException("wrong password for the Tributary SQL server (TRIBUTARY_SQL_PASSWORD)");
    }
  }
}
