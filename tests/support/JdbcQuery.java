// Runs one query through pgjdbc and prints each row as its columns' getString values joined by '|'.
// Usage: java -cp postgresql.jar JdbcQuery.java URL USER PASSWORD SQL PARAM  (SQL has one '?' for PARAM)
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;

public class JdbcQuery {
    public static void main(String[] args) throws Exception {
        try (Connection connection = DriverManager.getConnection(args[0], args[1], args[2]);
             PreparedStatement statement = connection.prepareStatement(args[3])) {
            statement.setString(1, args[4]);
            try (ResultSet rows = statement.executeQuery()) {
                int columns = rows.getMetaData().getColumnCount();
                while (rows.next()) {
                    StringBuilder line = new StringBuilder();
                    for (int i = 1; i <= columns; i++) {
                        if (i > 1) line.append('|');
                        line.append(rows.getString(i));
                    }
                    System.out.println(line);
                }
            }
        }
    }
}
